package io.github.djlamp.amp.cast.strategy;

import ai.djl.Device;
import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.policy.DefaultCastRules;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One leaf of the shadow tree that the engine's own autocast runs ({@link
 * AmpBackend#withEngineAutocast}): a block whose forward is engine code djl-amp cannot descend into
 * (a TorchScript module) or DJL code that reads no data type of the arrays it makes (DJL's {@code
 * LSTM}, {@code RNN}). Inputs are passed as they arrive and parameters as the trainer holds them
 * (fp32): autocast casts each operation's operands, in the policy's compute precision, as PyTorch's
 * {@code torch.autocast} does. Every floating output is cast to fp32 at the boundary, so no 16-bit
 * array it made reaches DJL code after it.
 *
 * <p>Where the engine cannot run the block under autocast on this machine (oneDNN has no bf16 LSTM
 * on a CPU without bf16 instructions), the first forward that fails is run again in fp32, and the
 * stage stays fp32 with a WARN that gives the engine's reason. An error of fp32 too is the block's
 * own and is thrown. Where the engine's autocast would compute the block in another precision than
 * the policy's ({@link AmpBackend#engineAutocastRefusal}: cuDNN's recurrent kernels in fp16 under a
 * bfloat16 policy), the stage runs fp32 from the start, with a WARN that says why.
 *
 * <p>With kernel checks on, the first forward at each input signature checks the block under
 * autocast against fp32 first ({@link StageStore#engineAutocastRunsLow}): the engine's kernels
 * inside are as wrong as any where the platform's are, and a stage the check finds wrong runs in
 * fp32 from then on.
 */
public final class AutocastStage extends ShadowBlock {

    private static final Logger logger = LoggerFactory.getLogger(AutocastStage.class);

    private final String path;
    private final StageRelease release;
    private final BiConsumer<String, String> fallbacks;
    private volatile String fallback;
    private volatile Precision lastComputed;
    private volatile boolean refusalAsked;
    private volatile InputPrecisions computedPrecisions;
    private volatile Shape[] checkedShapes;
    private volatile boolean parametersMade;

    /**
     * Makes the stage of {@code inner}.
     *
     * @param inner the block the engine's autocast runs
     * @param path its path in the tree
     * @param release drops the handles to the casts the stage consumed
     * @param fallbacks told the path and the reason once, when the stage turns to fp32 for good
     *     (the precision summary shows what ran)
     */
    public AutocastStage(
            Block inner, String path, StageRelease release, BiConsumer<String, String> fallbacks) {
        super(inner);
        this.path = path;
        this.release = release;
        this.fallbacks = fallbacks;
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        if (!(parameterStore instanceof StageStore)) {
            return inner.forward(parameterStore, inputs, training, params);
        }
        StageStore casting = (StageStore) parameterStore;
        NDList outputs;
        if (fallback != null || inputs.isEmpty()) {
            outputs = forwardFp32(casting, inputs, training, params);
        } else {
            outputs = forwardAutocast(casting, inputs, training, params);
        }
        casting.countMade(outputs, inputs);
        casting.recordArithmetic(
                path,
                inner,
                fallback == null ? casting.computePrecision() : Precision.FP32,
                inputs,
                outputs);
        return outputs;
    }

    private NDList forwardAutocast(
            StageStore casting, NDList inputs, boolean training, PairList<String, Object> params) {
        AmpBackend backend = casting.backend();
        Precision precision = casting.computePrecision();
        Device device = inputs.head().getDevice();
        // asked once: the stage belongs to one device's shadow tree, and the precision is fixed
        String refusal =
                refusalAsked ? null : backend.engineAutocastRefusal(inner, device, precision);
        refusalAsked = true;
        if (refusal != null) {
            fallBack(refusal);
            logger.warn(
                    "djl-amp: {} ({}) computes in fp32 on {}: {}. Override it as fp32 in the"
                            + " policy to silence this.",
                    path.isEmpty() ? "the root block" : "'" + path + "'",
                    inner.getClass().getName(),
                    device,
                    refusal);
            return forwardFp32(casting, inputs, training, params);
        }
        if (!parametersMade) {
            if (!inner.getParameters().values().stream().allMatch(Parameter::isInitialized)) {
                // DJL makes a block's parameters at its first training forward where the block's
                // own initialize leaves them to its children's forwards (d2l-java's encoder-
                // decoders): nothing to check against before, so this forward runs in fp32 and
                // makes them, and the check and 16 bits begin with the next
                casting.deferArithmetic();
                return forwardFp32(casting, inputs, training, params);
            }
            parametersMade = true;
        }
        NDList computed;
        try {
            if (!checkedAt(inputs)
                    && !casting.engineAutocastRunsLow(inner, path, inputs, training, params)) {
                fallBack("its check against fp32 found it wrong on this machine");
                return forwardFp32(casting, inputs, training, params);
            }
            computed =
                    backend.withEngineAutocast(
                            device,
                            precision,
                            // a list of its own: a forward may replace its inputs' entries
                            // (d2l-java's RNNModel does), and a refused one is run again
                            () ->
                                    inner.forward(
                                            casting.delegate(),
                                            new NDList(inputs),
                                            training,
                                            params));
        } catch (EngineException e) {
            NDList outputs = forwardFp32(casting, inputs, training, params);
            fallBack(e.getMessage());
            logger.warn(
                    "djl-amp: {} ({}) computes in fp32: the engine cannot run it under its {}"
                            + " autocast on this machine ({}). Nothing to change; override it as"
                            + " fp32 in the policy to skip this attempt.",
                    path.isEmpty() ? "the root block" : "'" + path + "'",
                    inner.getClass().getName(),
                    precision.canonicalName(),
                    e.getMessage());
            return outputs;
        }
        InputPrecisions known = outputPrecisions(backend);
        lastComputed = computed.isEmpty() ? null : known.of(0, computed.head());
        NDList outputs = casting.toFp32(computed, known);
        release.closeConsumed(computed, inputs, outputs);
        return outputs;
    }

    private void fallBack(String reason) {
        fallback = reason;
        fallbacks.accept(path, reason);
    }

    /**
     * Returns whether the stage's check ran at these inputs' shapes already (the last shapes
     * checked), and remembers them: the check is asked once per signature, not at every forward.
     */
    private boolean checkedAt(NDList inputs) {
        Shape[] checked = checkedShapes;
        if (checked != null && checked.length == inputs.size()) {
            int i = 0;
            while (i < checked.length && checked[i].equals(inputs.get(i).getShape())) {
                i++;
            }
            if (i == checked.length) {
                return true;
            }
        }
        Shape[] shapes = new Shape[inputs.size()];
        for (int i = 0; i < shapes.length; i++) {
            shapes[i] = inputs.get(i).getShape();
        }
        checkedShapes = shapes;
        return false;
    }

    /** The precisions of the outputs libtorch's autocast computes, decided at the first forward. */
    private InputPrecisions outputPrecisions(AmpBackend backend) {
        InputPrecisions known = computedPrecisions;
        if (known == null) {
            known = new InputPrecisions(backend);
            computedPrecisions = known;
        }
        return known;
    }

    private NDList forwardFp32(
            StageStore casting, NDList inputs, boolean training, PairList<String, Object> params) {
        NDList cast = casting.toFp32(inputs);
        NDList outputs = inner.forward(casting.delegate(), cast, training, params);
        release.closeConsumed(cast, inputs, outputs);
        return outputs;
    }

    /**
     * Returns the precision of the first output of the last forward under autocast, before the cast
     * at the boundary (tests).
     *
     * @return the precision, or null before the first forward under autocast
     */
    public Precision lastComputedPrecision() {
        return lastComputed;
    }

    /**
     * Returns the engine's reason when the stage runs in fp32 instead, else null (tests).
     *
     * @return the reason, or null
     */
    public String fallbackReason() {
        return fallback;
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return DefaultCastRules.ENGINE_AUTOCAST + "(" + (path.isEmpty() ? "root" : path) + ")";
    }
}
