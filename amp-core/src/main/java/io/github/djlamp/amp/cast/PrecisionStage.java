package io.github.djlamp.amp.cast;

import ai.djl.Device;
import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBaseBlock;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.cast.strategy.InputPrecisions;
import io.github.djlamp.amp.cast.strategy.ShadowBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.verify.KernelVerdict;
import io.github.djlamp.amp.verify.KernelVerifier;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One leaf of the shadow tree: runs the user's block in the precision its {@link CastCategory}
 * gives it.
 *
 * <ul>
 *   <li>{@link CastCategory#LOW}: floating inputs cast to the compute precision; WEIGHT and BIAS
 *       read through the casting store;
 *   <li>{@link CastCategory#FP32}: floating inputs cast to fp32; parameters as they are;
 *   <li>{@link CastCategory#PASS_THROUGH}: inputs and parameters as they are.
 * </ul>
 */
final class PrecisionStage extends ShadowBlock {

    private static final Logger logger = LoggerFactory.getLogger(PrecisionStage.class);

    private final CastCategory category;
    private final String path;
    private final IntermediateRelease release;
    private final boolean takesLabels;
    private final Map<List<Object>, KernelVerdict> verdicts = new ConcurrentHashMap<>();
    private volatile Known lastVerdict;
    private volatile List<Pair<String, Block>> inside;
    // null once logged: the shadow tree is built per device, so this is once per block and device
    private volatile TrustBreadcrumb pendingBreadcrumb;
    private final String vouchedBy;
    private volatile InputPrecisions inputPrecisions;
    private volatile InputPrecisions labelPrecisions;

    PrecisionStage(Block inner, CastCategory category, String path, IntermediateRelease release) {
        this(inner, category, path, release, null);
    }

    /**
     * Makes a stage that logs {@code breadcrumb} before its first bf16 forward.
     *
     * @param breadcrumb the line, or null for a unit that computes in 16 bits on nobody's word
     */
    PrecisionStage(
            Block inner,
            CastCategory category,
            String path,
            IntermediateRelease release,
            TrustBreadcrumb breadcrumb) {
        this(inner, category, path, release, breadcrumb, null);
    }

    /**
     * Makes a stage that logs {@code breadcrumb} before its first bf16 forward.
     *
     * @param breadcrumb the line, or null for a unit that computes in 16 bits on nobody's word
     * @param vouchedBy why a unit of unknown content computes in 16 bits ("the policy trusts it"),
     *     for the message when the engine refuses its forward; null for one djl-amp's rules know
     */
    PrecisionStage(
            Block inner,
            CastCategory category,
            String path,
            IntermediateRelease release,
            TrustBreadcrumb breadcrumb,
            String vouchedBy) {
        super(inner);
        this.category = category;
        this.path = path;
        this.release = release;
        this.pendingBreadcrumb = breadcrumb;
        this.vouchedBy = vouchedBy;
        this.takesLabels = overridesLabelsForward(inner);
    }

    /**
     * Whether {@code block}'s class (or a superclass below DJL's {@code AbstractBaseBlock}) has a
     * forward with labels of its own: DJL's {@code EncoderDecoder}, {@code SequentialBlock} and
     * {@code ParallelBlock} do. Any other block runs that forward as a training forward of the data
     * alone.
     */
    static boolean overridesLabelsForward(Block block) {
        Class<?>[] withLabels = {ParameterStore.class, NDList.class, NDList.class, PairList.class};
        for (Class<?> c = block.getClass();
                c != null && c != AbstractBaseBlock.class && c != Object.class;
                c = c.getSuperclass()) {
            for (Method method : c.getDeclaredMethods()) {
                String name = method.getName();
                if ((name.equals("forward") || name.equals("forwardInternal"))
                        && Arrays.equals(method.getParameterTypes(), withLabels)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        return forward(parameterStore, inputs, null, training, params);
    }

    /**
     * A training forward with labels: a block with a labels forward of its own gets the labels,
     * cast as its data is; any other runs a training forward of the data, as in DJL.
     */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList data,
            NDList labels,
            PairList<String, Object> params) {
        return forward(parameterStore, data, takesLabels ? labels : null, true, params);
    }

    /** Both forwards: {@code labels} null for the one without. */
    private NDList forward(
            ParameterStore parameterStore,
            NDList inputs,
            NDList labels,
            boolean training,
            PairList<String, Object> params) {
        if (!(parameterStore instanceof CastingParameterStore)) {
            return run(parameterStore, inputs, labels, training, params);
        }
        CastingParameterStore casting = (CastingParameterStore) parameterStore;
        NDList outputs = forwardCast(casting, inputs, labels, training, params);
        casting.countMade(outputs, inputs);
        return outputs;
    }

    /** The inner block's forward, with labels when there are any. */
    private NDList run(
            ParameterStore store,
            NDList inputs,
            NDList labels,
            boolean training,
            PairList<String, Object> params) {
        return labels == null
                ? inner.forward(store, inputs, training, params)
                : inner.forward(store, inputs, labels, params);
    }

    private NDList forwardCast(
            CastingParameterStore casting,
            NDList inputs,
            NDList labels,
            boolean training,
            PairList<String, Object> params) {
        return switch (category) {
            case LOW, TRUSTED, AUTOCAST -> forwardLow(casting, inputs, labels, training, params);
            case FP32 -> forwardFp32(casting, inputs, labels, training, params);
            case PASS_THROUGH -> forwardPassThrough(casting, inputs, labels, training, params);
            case CONTAINER ->
                    throw new IllegalStateException(
                            "'" + path + "' is a container: the shadow tree descends into it");
        };
    }

    /** Runs in fp32: floating inputs and labels cast to fp32, parameters as they are. */
    private NDList forwardFp32(
            CastingParameterStore casting,
            NDList inputs,
            NDList labels,
            boolean training,
            PairList<String, Object> params) {
        NDList outputs =
                forwardAndReleaseCasts(
                        casting.delegate(),
                        casting.toFp32(inputs, inputPrecisions(casting)),
                        inputs,
                        labels == null
                                ? null
                                : castLabels(
                                        casting.toFp32(labels, labelPrecisions(casting)), labels),
                        labels,
                        training,
                        params);
        casting.recordArithmetic(path, inner, Precision.FP32, inputs, outputs);
        return outputs;
    }

    /** Runs in the compute precision, or as the kernel check of this signature decided. */
    private NDList forwardLow(
            CastingParameterStore casting,
            NDList inputs,
            NDList labels,
            boolean training,
            PairList<String, Object> params) {
        KernelVerdict verdict = verdict(casting, inputs, training);
        if (verdict != null && !verdict.runsLowPrecision()) {
            return forwardFp32(casting, inputs, labels, training, params);
        }
        CastingParameterStore low =
                verdict == null ? casting : casting.withLayout(verdict.getLayout());
        NDList cast = low.toLow(inputs, inputPrecisions(casting));
        if (pendingBreadcrumb != null && low.computePrecision() == Precision.BF16) {
            leaveBreadcrumb(cast);
        }
        NDList castLabels =
                labels == null
                        ? null
                        : castLabels(low.toLow(labels, labelPrecisions(casting)), labels);
        NDList outputs;
        try {
            outputs =
                    forwardAndReleaseCasts(low, cast, inputs, castLabels, labels, training, params);
        } catch (EngineException e) {
            throw vouchedForwardFailed(e, low.computePrecision());
        }
        casting.recordArithmetic(path, inner, low.computePrecision(), inputs, outputs);
        return outputs;
    }

    /**
     * What a unit run in 16 bits on someone's word (a trusted class, {@code LowPrecisionSafe})
     * tells the user when the engine refuses its forward, typically an fp32 array of its own
     * meeting the 16-bit ones (DJL's DeepAR: "mat1 and mat2 must have the same dtype"); another
     * failure is the engine's own.
     */
    private RuntimeException vouchedForwardFailed(EngineException e, Precision precision) {
        if (vouchedBy == null) {
            return e;
        }
        return new AmpException(
                "'"
                        + (path.isEmpty() ? "root" : path)
                        + "' ("
                        + inner.getClass().getName()
                        + ") runs as one unit in "
                        + precision.canonicalName()
                        + " because "
                        + vouchedBy
                        + ", and the engine refused its forward: "
                        + e.getMessage()
                        + (mixesTypes(e)
                                ? ". Its own code mixes arrays of its own with the 16-bit ones."
                                : ". The engine cannot run one of its operations in "
                                        + precision.canonicalName()
                                        + " on this machine, or its own code mixes arrays of its"
                                        + " own with the 16-bit ones.")
                        + " Keep it in fp32 with the override class:"
                        + inner.getClass().getName()
                        + "=fp32 in the policy (for example Amp.wrap(block, \"mixed_"
                        + precision.canonicalName()
                        + "[class:"
                        + inner.getClass().getName()
                        + "=fp32]\")), or make its arrays in its input's data type.",
                e);
    }

    /** Whether the engine's message says two operands' data types differ. */
    private static boolean mixesTypes(EngineException e) {
        String message = String.valueOf(e.getMessage());
        return message.contains("same dtype")
                || message.contains("should be the same")
                || message.contains("expected scalar type");
    }

    /** Runs on the inputs as they are, which may be bf16 outputs of the stage before. */
    private NDList forwardPassThrough(
            CastingParameterStore casting,
            NDList inputs,
            NDList labels,
            boolean training,
            PairList<String, Object> params) {
        if (pendingBreadcrumb != null && casting.anyBf16(inputs)) {
            leaveBreadcrumb(inputs);
        }
        return run(casting.delegate(), inputs, labels, training, params);
    }

    private InputPrecisions inputPrecisions(CastingParameterStore casting) {
        InputPrecisions known = inputPrecisions;
        if (known == null) {
            known = new InputPrecisions(casting.backend());
            inputPrecisions = known;
        }
        return known;
    }

    private InputPrecisions labelPrecisions(CastingParameterStore casting) {
        InputPrecisions known = labelPrecisions;
        if (known == null) {
            known = new InputPrecisions(casting.backend());
            labelPrecisions = known;
        }
        return known;
    }

    /**
     * Logs the line that names this block before its first bf16 forward: if the block breaks its
     * promise, DJL ends the JVM in the forward and this line is the last trace djl-amp leaves.
     */
    private synchronized void leaveBreadcrumb(NDList inputs) {
        TrustBreadcrumb breadcrumb = pendingBreadcrumb;
        if (breadcrumb != null) {
            pendingBreadcrumb = null;
            breadcrumb.log(inputs.isEmpty() ? null : inputs.head().getDevice());
        }
    }

    /**
     * Returns the kernel check's verdict for this layer at this input: checked at the first use of
     * each input shape, device, precision and whether the input's gradient is computed (then its
     * kernel is checked too). A step that repeats the last one's signature (the steady state)
     * compares five fields and allocates nothing; asking whether the input is tracked is one engine
     * call.
     */
    private KernelVerdict verdict(CastingParameterStore casting, NDList inputs, boolean training) {
        boolean own = casting.verifies(inner);
        if (inputs.isEmpty()
                || (own && inputs.size() != 1)
                || (!own && (!casting.verifying() || layersInside().isEmpty()))) {
            return null;
        }
        NDArray input = inputs.head();
        Shape shape = input.getShape();
        Device device = input.getDevice();
        Precision precision = casting.computePrecision();
        Known last = lastVerdict;
        // a verdict that checked the input's gradient kernel holds whether or not this input
        // needs one, so the steady state asks the engine nothing (a stage whose input needs no
        // gradient, the first layer's, still asks: a later input may need one)
        if (last != null
                && (last.gradient || !training)
                && last.matches(shape, device, precision, training, last.gradient)) {
            return last.verdict;
        }
        // inference runs no backward: its input gradients are not checked, nor asked about
        boolean gradient = training && casting.checksInputGradient(input);
        if (last != null && last.matches(shape, device, precision, training, gradient)) {
            return last.verdict;
        }
        List<Object> key = Arrays.asList(shape, device, precision, training, gradient);
        KernelVerdict verdict = verdicts.get(key);
        if (verdict == null) {
            verdict =
                    own
                            ? casting.verdict(inner, path, inputs, training, gradient)
                            : casting.verdictInside(layersInside(), device, training);
            if (verdict == null) {
                return null;
            }
            if (!own && !verdict.runsLowPrecision()) {
                logger.warn(
                        "djl-amp: '{}' ({}) runs in fp32 at input {} on {}: the {} kernel of a"
                                + " layer inside it ({}) is wrong, and djl-amp runs the block as a"
                                + " whole, so the whole block falls back",
                        path.isEmpty() ? "root" : path,
                        inner.getClass().getName(),
                        shape,
                        device,
                        precision.canonicalName(),
                        String.join(", ", verdict.getPaths()));
            }
            verdicts.put(key, verdict);
        }
        lastVerdict = new Known(shape, device, precision, training, gradient, verdict);
        return verdict;
    }

    /**
     * The convolutions and linear layers inside a unit that is not one itself (a block marked
     * {@code LowPrecisionSafe}, one a policy trusts, a container overridden as low), with their
     * paths: DJL's own blocks, which compute in 16 bits because the unit does, and are checked as
     * the unit's layers are ({@link CastingParameterStore#verdictInside}).
     */
    private List<Pair<String, Block>> layersInside() {
        List<Pair<String, Block>> found = inside;
        if (found == null) {
            found = new ArrayList<>();
            collectLayers(inner, path, found);
            inside = found;
        }
        return found;
    }

    private static void collectLayers(Block block, String at, List<Pair<String, Block>> found) {
        for (Pair<String, Block> child : block.getChildren()) {
            String childPath = BlockPaths.child(at, child.getKey());
            if (KernelVerifier.covers(child.getValue())) {
                found.add(new Pair<>(childPath, child.getValue()));
            } else {
                collectLayers(child.getValue(), childPath, found);
            }
        }
    }

    /** The verdict of the last signature this stage ran. */
    private static final class Known {
        final Shape shape;
        final Device device;
        final Precision precision;
        final boolean training;
        final boolean gradient;
        final KernelVerdict verdict;

        Known(
                Shape shape,
                Device device,
                Precision precision,
                boolean training,
                boolean gradient,
                KernelVerdict verdict) {
            this.shape = shape;
            this.device = device;
            this.precision = precision;
            this.training = training;
            this.gradient = gradient;
            this.verdict = verdict;
        }

        boolean matches(
                Shape shape,
                Device device,
                Precision precision,
                boolean training,
                boolean gradient) {
            return this.training == training
                    && this.gradient == gradient
                    && this.precision == precision
                    && this.shape.equals(shape)
                    && this.device.equals(device);
        }
    }

    /**
     * Runs the block on cast inputs (and cast labels, when there are labels), then drops the
     * handles to the casts it has consumed.
     */
    private NDList forwardAndReleaseCasts(
            ParameterStore store,
            NDList cast,
            NDList inputs,
            NDList castLabels,
            NDList labels,
            boolean training,
            PairList<String, Object> params) {
        // a block may add to its labels (EncoderDecoder adds the encoder's states): what to
        // release is what was cast, taken before the forward
        NDList castOnly =
                castLabels == null || castLabels == labels ? null : new NDList(castLabels);
        NDList outputs = run(store, cast, castLabels, training, params);
        release.closeConsumed(cast, inputs, outputs);
        if (castOnly != null) {
            release.closeConsumed(castOnly, labels, outputs);
        }
        return outputs;
    }

    /**
     * The labels to hand to the block: the caller's own list when the cast changed none of them
     * (integer tokens, fp32 labels of an fp32 block), so that the block sees what it would see in
     * DJL; otherwise the cast list. Null when there are no labels.
     */
    private static NDList castLabels(NDList cast, NDList labels) {
        if (labels == null) {
            return null;
        }
        for (int i = 0; i < labels.size(); i++) {
            if (cast.get(i) != labels.get(i)) {
                return cast;
            }
        }
        return labels;
    }

    /**
     * Returns the kernel verdict of the last signature this stage ran, or null where none was
     * checked: what a compiled run made of this stage follows.
     */
    KernelVerdict lastVerdict() {
        Known last = lastVerdict;
        return last == null ? null : last.verdict;
    }

    /** Returns whether this stage has yet to log its breadcrumb (tests). */
    boolean hasPendingBreadcrumb() {
        return pendingBreadcrumb != null;
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return category.configName() + "(" + (path.isEmpty() ? "root" : path) + ")";
    }
}
