package io.github.djlamp.amp.policy;

/**
 * Declares that a block's own forward is safe to run in 16 bits, bf16 included: a user's {@link
 * ai.djl.nn.AbstractBlock} that djl-amp cannot look into would otherwise run in fp32.
 *
 * <p>A block implementing this interface gets {@link CastCategory#LOW} by default: its floating
 * inputs are cast to the compute precision and every WEIGHT and BIAS it (or a child it calls) reads
 * from the parameter store is cast too, so its whole forward computes in 16 bits. The block's
 * author promises that its own code calls no {@code softmax} or {@code logSoftmax} on a bf16 array
 * and does not pass a bf16 array's {@code getDataType()} to DJL (for example {@code ones(shape,
 * x.getDataType())}): in DJL's PyTorch engine (0.35.1 and 0.36.0) both terminate the JVM. djl-amp
 * checks what it can see: under bf16, a child of such a block that djl-amp keeps in fp32 (a lambda
 * of unknown content, a transformer block, an unknown block not itself marked) makes {@code
 * Amp.wrap} throw.
 *
 * <pre>{@code
 * class MyGatedUnit extends AbstractBlock implements LowPrecisionSafe { ... }
 * }</pre>
 */
public interface LowPrecisionSafe {}
