package io.github.djlamp.amp.cast;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterServer;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.cast.checkpoint.CheckpointSaving;
import io.github.djlamp.amp.cast.checkpoint.SegmentStore;
import io.github.djlamp.amp.cast.internal.WeightCastCache;
import io.github.djlamp.amp.cast.strategy.InputPrecisions;
import io.github.djlamp.amp.cast.strategy.StageStore;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.verify.KernelVerdict;
import io.github.djlamp.amp.verify.KernelVerifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * The parameter store one forward pass of a {@link MixedPrecisionBlock} hands down its shadow tree:
 * the trainer's own store, plus the step's casting context. Low-precision stages read WEIGHT and
 * BIAS parameters through it, cast to the compute precision; every other stage reads the trainer's
 * store directly.
 */
final class CastingParameterStore extends StageStore implements SegmentStore {

    private final ParameterStore delegate;
    private final AmpBackend backend;
    private final WeightCastCache cache;
    private final Precision computePrecision;
    private final MemoryLayout lowLayout;
    private final NDManager stepManager;
    private final KernelVerifier verifier;
    private final boolean forceLayout;
    private final boolean cachesWeights;
    private final boolean recomputedLater;
    private final CheckpointSaving saving;
    // asked once a forward: the casts it reads from the cache must be in autograd's graph if it is
    private final boolean recording;
    // set for a device's first training forward only
    private ArithmeticShare arithmetic;

    CastingParameterStore(
            ParameterStore delegate,
            AmpBackend backend,
            WeightCastCache cache,
            Precision computePrecision,
            MemoryLayout lowLayout,
            NDManager stepManager,
            KernelVerifier verifier) {
        super(delegate.getManager());
        this.delegate = delegate;
        this.backend = backend;
        this.cache = cache;
        this.computePrecision = computePrecision;
        this.lowLayout = lowLayout;
        this.stepManager = stepManager;
        this.verifier = verifier;
        this.forceLayout = false;
        this.cachesWeights = true;
        this.recomputedLater = false;
        this.saving = null;
        this.recording = cache.isRecording();
    }

    /** A copy of {@code from} that differs in how this forward casts, caches and counts. */
    private CastingParameterStore(
            CastingParameterStore from,
            MemoryLayout lowLayout,
            NDManager stepManager,
            boolean forceLayout,
            boolean cachesWeights,
            boolean recomputedLater,
            CheckpointSaving saving) {
        super(from.delegate.getManager());
        this.delegate = from.delegate;
        this.backend = from.backend;
        this.cache = from.cache;
        this.computePrecision = from.computePrecision;
        this.verifier = from.verifier;
        this.lowLayout = lowLayout;
        this.stepManager = stepManager;
        this.forceLayout = forceLayout;
        this.cachesWeights = cachesWeights;
        this.recomputedLater = recomputedLater;
        this.saving = saving;
        this.arithmetic = from.arithmetic;
        this.recording = from.recording;
    }

    /** Counts on {@code share} the arithmetic of the stages this forward runs. */
    void countArithmetic(ArithmeticShare share) {
        this.arithmetic = share;
    }

    /** The next forward counts the arithmetic instead of this one. */
    @Override
    public void deferArithmetic() {
        if (arithmetic != null) {
            arithmetic.defer();
        }
    }

    /** Records a stage's arithmetic where this forward counts it. */
    @Override
    public void recordArithmetic(
            String path, Block block, Precision ran, NDList inputs, NDList outputs) {
        if (arithmetic != null) {
            arithmetic.record(path, block, ran, inputs, outputs);
        }
    }

    /** Records the arithmetic of a product that is not a layer's where this forward counts it. */
    @Override
    public void recordProduct(String path, String what, Precision ran, long flops) {
        if (arithmetic != null) {
            arithmetic.recordProduct(path, what, ran, flops);
        }
    }

    @Override
    public ParameterStore delegate() {
        return delegate;
    }

    @Override
    public Precision computePrecision() {
        return computePrecision;
    }

    @Override
    public ParameterStore asParameterStore() {
        return this;
    }

    /** Returns whether this forward checks the 16-bit kernel of {@code block}. */
    boolean verifies(Block block) {
        return verifier != null && KernelVerifier.covers(block);
    }

    /**
     * Returns the verdict of the kernel check for a low-precision layer at this input, checking the
     * kernel first where no layer has run its signature yet; null when kernel verification is off
     * or djl-amp does not check this kind of layer.
     *
     * @param inputGradient whether the check covers the input's gradient ({@link
     *     #checksInputGradient}, in training)
     */
    KernelVerdict verdict(
            Block block, String path, NDList inputs, boolean training, boolean inputGradient) {
        if (!verifies(block) || inputs.size() != 1) {
            return null;
        }
        NDArray input = inputs.head();
        return verifier.verdict(
                block,
                path,
                input,
                delegate,
                training,
                computePrecision,
                layoutCandidates(input),
                inputGradient);
    }

    /** {@inheritDoc} */
    @Override
    public boolean engineAutocastRunsLow(
            Block block,
            String path,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        if (verifier == null) {
            return true;
        }
        return verifier.stageVerdict(
                        block, path, inputs, delegate, training, computePrecision, params)
                .runsLowPrecision();
    }

    /** {@inheritDoc} */
    @Override
    public boolean productRunsLow(
            String path, String what, NDArray left, NDArray right, boolean training) {
        if (verifier == null) {
            return true;
        }
        if (training) {
            // a verdict that checked the operands' gradients holds whether or not they need them:
            // the steady state asks the engine nothing
            KernelVerdict checked =
                    verifier.productVerdictIfChecked(
                            path, what, left, right, computePrecision, true);
            if (checked != null) {
                return checked.runsLowPrecision();
            }
        }
        boolean gradients = training && (checksInputGradient(left) || checksInputGradient(right));
        return verifier.productVerdict(path, what, left, right, computePrecision, gradients)
                .runsLowPrecision();
    }

    /** Returns whether this forward checks 16-bit kernels at all. */
    boolean verifying() {
        return verifier != null;
    }

    /**
     * Returns the verdict for a unit djl-amp runs as a whole in 16 bits (a block marked {@code
     * LowPrecisionSafe}, one a policy trusts) from the kernel checks of the convolutions and linear
     * layers inside it, which compute in 16 bits because the unit does. Each is checked at the
     * input shape it was initialized with (the unit's code, which hands it its input, is not
     * djl-amp's to follow), on a fixed input of that shape. The unit can only change precision as a
     * whole: the first layer that needs fp32 makes it fall back (its verdict is returned); where a
     * layer runs only in the other memory layout, the others are checked in that one too and the
     * unit runs in it. Null when no layer inside can be checked yet (not initialized).
     *
     * @param layers the layers inside, with their paths
     * @param device the device the unit computes on
     * @param training whether the unit trains: the layers' input-gradient kernels are checked too
     */
    KernelVerdict verdictInside(List<Pair<String, Block>> layers, Device device, boolean training) {
        if (verifier == null) {
            return null;
        }
        List<KernelVerdict> found = new ArrayList<>();
        List<Pair<String, Block>> checked = new ArrayList<>();
        KernelVerdict moved = null;
        for (Pair<String, Block> layer : layers) {
            KernelVerdict verdict = layerVerdict(layer, device, training, null);
            if (verdict == null) {
                continue;
            }
            if (!verdict.runsLowPrecision()) {
                return verdict;
            }
            found.add(verdict);
            checked.add(layer);
            if (verdict.getLayout() != lowLayout && moved == null) {
                moved = verdict;
            }
        }
        if (found.isEmpty()) {
            return null;
        }
        if (moved == null) {
            return found.get(0);
        }
        for (int i = 0; i < found.size(); i++) {
            if (found.get(i).getLayout() != moved.getLayout()) {
                KernelVerdict again =
                        layerVerdict(checked.get(i), device, training, moved.getLayout());
                if (again != null && !again.runsLowPrecision()) {
                    return again;
                }
            }
        }
        return moved;
    }

    /** One layer's verdict on a fixed input of its initialization shape; null if unknown yet. */
    private KernelVerdict layerVerdict(
            Pair<String, Block> layer, Device device, boolean training, MemoryLayout only) {
        Block block = layer.getValue();
        if (!block.isInitialized()) {
            return null;
        }
        Shape[] shapes = block.getInputShapes();
        if (shapes == null || shapes.length != 1) {
            return null;
        }
        // a dimension left open at initialization (DJL's attention projections: (-1, E)) is 1
        long[] dimensions = shapes[0].getShape().clone(); // DJL hands out the shape's own array
        for (int i = 0; i < dimensions.length; i++) {
            dimensions[i] = Math.max(1, dimensions[i]);
        }
        Shape shape = new Shape(dimensions);
        try (NDManager scope = stepManager.newSubManager(device)) {
            // a fixed pattern, not the engine's generator: the check must not move the user's
            // random stream
            NDArray input = scope.arange((float) shape.size()).reshape(shape).mul(0.37f).sin();
            List<MemoryLayout> candidates =
                    only != null ? Collections.singletonList(only) : layoutCandidates(input);
            return verifier.verdict(
                    block,
                    layer.getKey(),
                    input,
                    delegate,
                    training,
                    computePrecision,
                    candidates,
                    training);
        }
    }

    private List<MemoryLayout> layoutCandidates(NDArray input) {
        if (input.getShape().dimension() != 4) {
            return Collections.singletonList(lowLayout);
        }
        MemoryLayout other =
                lowLayout == MemoryLayout.CHANNELS_LAST
                        ? MemoryLayout.CONTIGUOUS
                        : MemoryLayout.CHANNELS_LAST;
        return Arrays.asList(lowLayout, other);
    }

    /**
     * Returns this store with another layout for 16-bit inputs and weights, which it then makes
     * even of inputs already in the compute precision.
     */
    CastingParameterStore withLayout(MemoryLayout layout) {
        if (layout == lowLayout) {
            return this;
        }
        return new CastingParameterStore(
                this, layout, stepManager, true, cachesWeights, recomputedLater, saving);
    }

    /**
     * Returns this store casting weights afresh onto {@code manager}, bypassing the step's cache: a
     * checkpointed segment's forward without recording must not leave a cast with no path back to
     * its fp32 master for the recomputation to reuse, and a recomputation's casts are freed with
     * it.
     *
     * @param recomputedLater whether this is the forward without recording, which a recomputation
     *     with recording repeats: its layers check the kernels that recomputation runs
     */
    @Override
    public CastingParameterStore uncached(NDManager manager, boolean recomputedLater) {
        return new CastingParameterStore(
                this, lowLayout, manager, forceLayout, false, recomputedLater, saving);
    }

    /**
     * Returns this store counting on {@code saving} the activations its layers make (a checkpointed
     * segment's forward without recording, when the saving is being estimated).
     */
    @Override
    public CastingParameterStore counting(CheckpointSaving saving) {
        return new CastingParameterStore(
                this, lowLayout, stepManager, forceLayout, cachesWeights, recomputedLater, saving);
    }

    /**
     * Counts the outputs of a layer that are not its inputs passed on, where this store estimates a
     * checkpointing saving.
     */
    @Override
    public void countMade(NDList outputs, NDList inputs) {
        if (saving == null) {
            return;
        }
        NDList made = new NDList(outputs.size());
        for (NDArray output : outputs) {
            if (!containsSame(inputs, output)) {
                made.add(output);
            }
        }
        saving.made(made);
    }

    private static boolean containsSame(NDList arrays, NDArray array) {
        for (NDArray candidate : arrays) {
            if (candidate == array) { // by identity: DJL's NDArray.equals compares values
                return true;
            }
        }
        return false;
    }

    /**
     * Whether a layer's kernel check covers the gradient of {@code input}: where the input needs
     * one, and in a forward without recording that a recomputation repeats, where the same layer's
     * input will need one (its input gradient kernel runs in the recomputation's backward).
     */
    boolean checksInputGradient(NDArray input) {
        return recomputedLater || backend.requiresGradient(input);
    }

    @Override
    public AmpBackend backend() {
        return backend;
    }

    /** The manager that owns this forward pass's casts (the batch's, in EasyTrain). */
    @Override
    public NDManager stepManager() {
        return stepManager;
    }

    /** Casts floating inputs of a low-precision stage to the compute precision and layout. */
    NDList toLow(NDList arrays) {
        return castFloating(arrays, computePrecision, lowLayout, null);
    }

    /**
     * Casts floating inputs of a low-precision stage to the compute precision and layout, reading
     * their precisions through the stage's {@code known}.
     */
    NDList toLow(NDList arrays, InputPrecisions known) {
        return castFloating(arrays, computePrecision, lowLayout, known);
    }

    /** Casts floating arrays to contiguous fp32, reading their precisions through {@code known}. */
    @Override
    public NDList toFp32(NDList arrays, InputPrecisions known) {
        return castFloating(arrays, Precision.FP32, MemoryLayout.CONTIGUOUS, known);
    }

    /**
     * Casts floating arrays to the compute precision in the layout they have: the operands of an
     * operation that is not a layer, such as an attention product.
     */
    @Override
    public NDList toCompute(NDList arrays) {
        return castFloating(arrays, computePrecision, MemoryLayout.PRESERVE, null);
    }

    @Override
    public NDList toCompute(NDList arrays, InputPrecisions known) {
        return castFloating(arrays, computePrecision, MemoryLayout.PRESERVE, known);
    }

    /** Casts floating arrays to contiguous fp32, safe for any DJL operation. */
    @Override
    public NDList toFp32(NDList arrays) {
        return castFloating(arrays, Precision.FP32, MemoryLayout.CONTIGUOUS, null);
    }

    /** Returns whether any of the arrays is bf16. */
    boolean anyBf16(NDList arrays) {
        for (NDArray array : arrays) {
            if (backend.precisionOf(array) == Precision.BF16) {
                return true;
            }
        }
        return false;
    }

    /**
     * Casts every floating array that is not already {@code target}; others pass unchanged.
     *
     * @param known the caller's precisions decided once, or null to ask the engine of each array
     */
    private NDList castFloating(
            NDList arrays, Precision target, MemoryLayout layout, InputPrecisions known) {
        NDList result = new NDList(arrays.size());
        for (int i = 0; i < arrays.size(); i++) {
            NDArray array = arrays.get(i);
            Precision current = known == null ? backend.precisionOf(array) : known.of(i, array);
            if (current == null || (current == target && !(forceLayout && target.isReduced()))) {
                result.add(array);
            } else {
                NDArray cast = backend.cast(array, target, layout, stepManager);
                cast.setName(array.getName());
                result.add(cast);
                if (saving != null) {
                    saving.made(new NDList(cast));
                }
            }
        }
        return result;
    }

    /** {@inheritDoc} */
    @Override
    public NDArray getValue(Parameter parameter, Device device, boolean training) {
        NDArray master = delegate.getValue(parameter, device, training);
        if (master == null) {
            return null;
        }
        Parameter.Type type = parameter.getType();
        if (type == Parameter.Type.WEIGHT || type == Parameter.Type.BIAS) {
            if (training && cachesWeights) {
                return cache.get(
                        parameter, master, computePrecision, lowLayout, stepManager, recording);
            }
            NDArray cast = cache.cast(master, computePrecision, lowLayout, stepManager);
            if (saving != null) {
                saving.weightCast(cast);
            }
            return cast;
        }
        return master;
    }

    /** {@inheritDoc} */
    @Override
    public NDManager getManager() {
        return delegate.getManager();
    }

    /** {@inheritDoc} */
    @Override
    public void setParameterServer(ParameterServer parameterServer, Device[] devices) {
        delegate.setParameterServer(parameterServer, devices);
    }

    /** {@inheritDoc} */
    @Override
    public void updateAllParameters() {
        delegate.updateAllParameters();
    }

    /** {@inheritDoc} */
    @Override
    public void sync() {
        delegate.sync();
    }
}
