package io.github.djlamp.amp.policy;

/**
 * Declares that a block's own forward is safe to run in 16 bits, bf16 included: a user's {@link
 * ai.djl.nn.AbstractBlock} that djl-amp cannot look into would otherwise run in fp32.
 *
 * <p>A block implementing this interface gets {@link CastCategory#LOW} by default: its floating
 * inputs are cast to the compute precision and every WEIGHT and BIAS it (or a child it calls) reads
 * from the parameter store is cast too, so its whole forward computes in 16 bits.
 *
 * <p><b>What the author promises.</b> Under bf16, the block's own code calls no {@code softmax} or
 * {@code logSoftmax} on a bf16 array and does not pass a bf16 array's {@code getDataType()} to DJL
 * (as in {@code ones(shape, x.getDataType())}). DJL's PyTorch engine has no bfloat16 in its enum:
 * it reports such an array's type as {@code UNKNOWN}, and handing that to native code ends the JVM
 * with "terminate called without an active exception": no Java exception, nothing a JVM can catch.
 * The arrays the block makes itself are new arrays of DJL's own, so nothing djl-amp hands in can
 * guard them. Where the block needs one of those calls, cast to fp32 first with {@code
 * AmpBackends.forManager(m).cast(x, Precision.FP32, m)} (package {@code io.github.djlamp.amp.spi}),
 * which autograd records ({@code NDArray.toType} records no gradient), or keep the block in fp32.
 * Under fp16 the same calls are safe: DJL knows FLOAT16.
 *
 * <p><b>What djl-amp checks.</b> Under bf16, a child of such a block that djl-amp keeps in fp32 (a
 * lambda of unknown content, a transformer block, an unknown block not itself marked) makes {@code
 * Amp.wrap} throw. The block's own code it cannot check: before the block's first bf16 forward on
 * each device it logs one INFO line (logger {@code io.github.djlamp.amp.cast.MixedPrecisionBlock};
 * a logging configuration at WARN hides it, an asynchronous appender may lose it) naming the
 * block's path, its class, who vouched for it and the fix, so that when a broken promise ends the
 * JVM this line is the last djl-amp wrote: keep the block in fp32 with {@code
 * class:com.example.MyGatedUnit=fp32} in the policy string ({@link
 * PrecisionPolicy.Builder#overrideClass} or {@link PrecisionPolicy.Builder#overridePath} with
 * {@link CastCategory#FP32}), or cast inside it. The same holds for a class vouched for in the
 * policy ({@link CastCategory#TRUSTED}). DJL's own blocks that djl-amp's rules know log nothing.
 *
 * <pre>{@code
 * class MyGatedUnit extends AbstractBlock implements LowPrecisionSafe { ... }
 * }</pre>
 */
public interface LowPrecisionSafe {}
