package io.github.djlamp.amp.pytorch;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.nn.Block;
import ai.djl.nn.recurrent.LSTM;
import ai.djl.nn.recurrent.RNN;
import ai.djl.nn.recurrent.RecurrentBlock;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.util.Pair;
import io.github.djlamp.amp.compile.ForwardGraph;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.pytorch.cuda.CudaStepGraphs;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.CompiledForward;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import io.github.djlamp.amp.spi.DeviceScaleState;
import io.github.djlamp.amp.spi.DynamicScaleSettings;
import io.github.djlamp.amp.spi.FusedOptimizerStep;
import io.github.djlamp.amp.spi.LearningRate;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.spi.StepGraphs;
import io.github.djlamp.amp.spi.UpdateCounter;
import io.github.djlamp.amp.verify.CacheTopology;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The {@link AmpBackend} for DJL's PyTorch engine, registered through {@link
 * java.util.ServiceLoader}.
 */
public final class PtAmpBackend implements AmpBackend {

    /** One for the JVM: it keeps each thread's replaced stream. */
    private static final StepGraphs STEP_GRAPHS = new CudaStepGraphs();

    private final Map<String, DeviceCapabilities> capabilities = new ConcurrentHashMap<>();
    private final AtomicLong hostReads = new AtomicLong();
    private volatile AmpKernels kernels;

    /** Creates the backend; the kernels load on first use. */
    public PtAmpBackend() {}

    /** {@inheritDoc} */
    @Override
    public String getEngineName() {
        return "PyTorch";
    }

    /** {@inheritDoc} */
    @Override
    public NDArray cast(
            NDArray array, Precision target, MemoryLayout layout, NDManager resultManager) {
        PtNDArray pt = requirePyTorch(array);
        DataType type = pt.getDataType();
        // UNKNOWN is what DJL reports for bf16; asking PyTorch would cost a call per cast
        if (type != DataType.UNKNOWN && Precision.fromDataType(type) == null) {
            throw new AmpException(
                    "Cannot cast array '"
                            + describe(array)
                            + "' of type "
                            + array.getDataType()
                            + " to "
                            + target.canonicalName()
                            + ": mixed precision casts floating-point arrays only (fp32, fp16,"
                            + " bf16)");
        }
        MemoryLayout effective =
                layout == MemoryLayout.CHANNELS_LAST && pt.getShape().dimension() != 4
                        ? MemoryLayout.PRESERVE
                        : layout;
        NDArray result = kernels().cast(pt, target, effective);
        result.attach(resultManager);
        return result;
    }

    /** {@inheritDoc} */
    @Override
    public NDList castAll(
            List<NDArray> arrays, Precision target, MemoryLayout layout, NDManager resultManager) {
        if (arrays.size() < 2) {
            return AmpBackend.super.castAll(arrays, target, layout, resultManager);
        }
        PtNDArray[] pt = new PtNDArray[arrays.size()];
        for (int i = 0; i < pt.length; i++) {
            pt[i] = requirePyTorch(arrays.get(i));
            DataType type = pt[i].getDataType();
            if (type != DataType.UNKNOWN && Precision.fromDataType(type) == null) {
                // the one-by-one cast names the array and the fix
                return AmpBackend.super.castAll(arrays, target, layout, resultManager);
            }
        }
        NDList result = kernels().castAll(pt, target, layout);
        result.attach(resultManager);
        return result;
    }

    /** {@inheritDoc} */
    @Override
    public Precision precisionOf(NDArray array) {
        DataType type = array.getDataType();
        if (type != DataType.UNKNOWN) {
            return type == DataType.BFLOAT16 ? null : Precision.fromDataType(type);
        }
        return kernels().dtypeCode(requirePyTorch(array)) == AmpKernelScript.BFLOAT16
                ? Precision.BF16
                : null;
    }

    /** {@inheritDoc} */
    @Override
    public void unscaleAndCheck(NDList gradients, NDArray foundInf, NDArray invScale) {
        if (gradients.isEmpty()) {
            return;
        }
        kernels()
                .unscale(
                        requirePyTorch(gradients),
                        requireScalarFp32(foundInf, "foundInf"),
                        requireScalarFp32(invScale, "invScale"));
    }

    /**
     * Runs the generic-ops route of {@link #unscaleAndCheck} (isfinite reduction and multiply) on
     * every array whatever its precision; bf16 arrays always take it because CUDA has no bf16
     * version of the fused kernel. For tests that compare both routes.
     */
    void unscaleAndCheckGeneric(NDList gradients, NDArray foundInf, NDArray invScale) {
        kernels()
                .unscaleGeneric(
                        requirePyTorch(gradients),
                        requireScalarFp32(foundInf, "foundInf"),
                        requireScalarFp32(invScale, "invScale"));
    }

    /** {@inheritDoc} */
    @Override
    public float readFloat(NDArray array) {
        if (array.size() < 1) {
            throw new AmpException(
                    "readFloat needs an array with at least one element, got shape "
                            + array.getShape());
        }
        hostReads.incrementAndGet();
        return kernels().readFloat(requirePyTorch(array));
    }

    /** {@inheritDoc} */
    @Override
    public float[] readFloats(NDArray array) {
        hostReads.incrementAndGet();
        return kernels().readFloats(requirePyTorch(array));
    }

    /**
     * Returns how many host reads of device values went through this backend since the JVM started
     * ({@link #readFloat} and {@link #readFloats}): what tests count to prove a training step makes
     * none.
     *
     * @return the number of host reads
     */
    public long getHostReadCount() {
        return hostReads.get();
    }

    /** {@inheritDoc} */
    @Override
    public void fusedStep(FusedOptimizerStep step) {
        double[] settings = settingsInKernelOrder(step);
        if (step.getWeights().isEmpty()) {
            return;
        }
        requirePyTorch(step.getWeights());
        requirePyTorch(step.getGradients());
        step.getState().forEach(PtAmpBackend::requirePyTorch);
        LearningRate rate = step.getLearningRate();
        if (!rate.isFixed()) {
            requirePyTorch(rate.getValues());
        }
        UpdateCounter counter = step.getCounter();
        requirePyTorch(counter.getPerParameter());
        requirePyTorch(counter.getTrained());
        requirePyTorch(counter.getCount());
        requireScalarFp32(step.getFoundInf(), "foundInf");
        kernels().fusedStep(step, settings);
    }

    /** The step's settings in the order its kernel takes them; refuses a kernel or setting. */
    private static double[] settingsInKernelOrder(FusedOptimizerStep step) {
        List<String> names = FusedKernelScript.settings(step.getKernel());
        if (names == null) {
            throw new AmpException(
                    "djl-amp's PyTorch kernels have no fused '"
                            + step.getKernel()
                            + "' step; keep that optimizer's own update with"
                            + " AmpOptions.builder().fusedOptimizer(FusedOptimizer.OFF)");
        }
        if (step.getSettings().size() != names.size()
                || !step.getSettings().keySet().containsAll(names)) {
            throw new AmpException(
                    "The fused '"
                            + step.getKernel()
                            + "' step takes the settings "
                            + names
                            + ", got "
                            + step.getSettings().keySet());
        }
        double[] values = new double[names.size()];
        for (int i = 0; i < values.length; i++) {
            values[i] = step.getSettings().get(names.get(i));
        }
        return values;
    }

    /** {@inheritDoc} */
    @Override
    public void copy(NDList destinations, NDList sources) {
        if (destinations.size() != sources.size()) {
            throw new AmpException(
                    "copy needs as many sources as destinations, got "
                            + sources.size()
                            + " and "
                            + destinations.size());
        }
        if (!destinations.isEmpty()) {
            kernels().copy(requirePyTorch(destinations), requirePyTorch(sources));
        }
    }

    /** {@inheritDoc} */
    @Override
    public void restoreWhere(NDList live, NDList saved, NDArray foundInf) {
        if (live.size() != saved.size()) {
            throw new AmpException(
                    "restoreWhere needs one saved array per live array, got "
                            + saved.size()
                            + " for "
                            + live.size());
        }
        if (!live.isEmpty()) {
            kernels()
                    .restoreWhere(
                            requirePyTorch(live),
                            requirePyTorch(saved),
                            requireScalarFp32(foundInf, "foundInf"));
        }
    }

    /** {@inheritDoc} */
    @Override
    public void zero(NDList arrays) {
        if (!arrays.isEmpty()) {
            kernels().zero(requirePyTorch(arrays));
        }
    }

    /** {@inheritDoc} */
    @Override
    public void updateScale(
            NDArray scale,
            NDArray growthTracker,
            NDArray foundInf,
            double growthFactor,
            double backoffFactor,
            int growthInterval) {
        if (growthTracker.getDataType() != DataType.INT32 || growthTracker.size() != 1) {
            throw new AmpException(
                    "growthTracker must be a one-element INT32 array, got "
                            + growthTracker.getDataType()
                            + " "
                            + growthTracker.getShape());
        }
        kernels()
                .updateScale(
                        requireScalarFp32(scale, "scale"),
                        requirePyTorch(growthTracker),
                        requireScalarFp32(foundInf, "foundInf"),
                        growthFactor,
                        backoffFactor,
                        growthInterval);
    }

    /** {@inheritDoc} */
    @Override
    public void updateScaleWithHysteresis(
            DeviceScaleState state, NDArray foundInf, DynamicScaleSettings settings) {
        PtNDArray[] arrays = {
            requireScalarFp32(state.getScale(), "scale"),
            requireScalar(state.getGrowthTracker(), DataType.INT32, "growthTracker"),
            requireScalar(state.getOverflowsSinceChange(), DataType.INT32, "overflowsSinceChange"),
            requireScalar(state.getSkippedSteps(), DataType.INT64, "skippedSteps"),
            requireScalarFp32(state.getCollapsed(), "collapsed")
        };
        double[] factors = {
            settings.getGrowthFactor(),
            settings.getBackoffFactor(),
            settings.getMinScale(),
            settings.getMaxScale()
        };
        long[] counts = {settings.getGrowthInterval(), settings.getHysteresis()};
        kernels()
                .updateScaleWithHysteresis(
                        arrays, requireScalarFp32(foundInf, "foundInf"), factors, counts);
    }

    private static PtNDArray requireScalar(NDArray array, DataType type, String what) {
        if (array.getDataType() != type || array.size() != 1) {
            throw new AmpException(
                    what
                            + " must be a one-element "
                            + type
                            + " array, got "
                            + array.getDataType()
                            + " "
                            + array.getShape());
        }
        return requirePyTorch(array);
    }

    /**
     * {@inheritDoc}
     *
     * <p>On a CPU whose cache topology the kernel hides, the pass runs with libtorch's switch for
     * oneDNN off ({@link LibtorchOneDnn}), so that its convolutions run libtorch's own kernels;
     * where the switch cannot be reached, it runs as it is.
     */
    @Override
    public <T> T referencePass(Device device, Supplier<T> pass) {
        if (device.isGpu() || !CacheTopology.isHidden()) {
            return pass.get();
        }
        LibtorchOneDnn oneDnn;
        try {
            oneDnn = LibtorchOneDnn.get();
        } catch (RuntimeException | UnsatisfiedLinkError e) {
            return pass.get();
        }
        return oneDnn.withoutOneDnn(pass);
    }

    /** {@inheritDoc} */
    @Override
    public NDList valueAndGradients(
            Function<NDList, NDArray> function,
            NDList inputs,
            NDArray cotangent,
            NDManager resultManager) {
        boolean recording = JniUtils.isGradMode();
        try (NDManager scratch = resultManager.newSubManager()) {
            JniUtils.setGradMode(true);
            NDList leaves = new NDList(inputs.size());
            for (NDArray input : inputs) {
                PtNDArray leaf = JniUtils.detachGradient(requirePyTorch(input));
                leaf.attach(scratch);
                leaf.setRequiresGradient(true);
                leaves.add(leaf);
            }
            PtNDArray output = requirePyTorch(function.apply(leaves));
            output.attach(scratch);
            JniUtils.backward(output, requirePyTorch(cotangent), false, false);
            JniUtils.setGradMode(false);
            NDList results = new NDList(inputs.size() + 1);
            results.add(toFp32(output, resultManager));
            for (NDArray leaf : leaves) {
                PtNDArray gradient = JniUtils.getGradient((PtNDArray) leaf);
                if (gradient == null) {
                    results.add(resultManager.zeros(leaf.getShape()));
                } else {
                    gradient.attach(scratch);
                    results.add(toFp32(gradient, resultManager));
                }
            }
            return results;
        } finally {
            JniUtils.setGradMode(recording);
        }
    }

    /** {@inheritDoc} */
    @Override
    public boolean setRecording(boolean recording) {
        boolean before = JniUtils.isGradMode();
        if (before != recording) {
            JniUtils.setGradMode(recording);
        }
        return before;
    }

    /** {@inheritDoc} */
    @Override
    public boolean isRecording() {
        return JniUtils.isGradMode();
    }

    /** {@inheritDoc} */
    @Override
    public void requireGradient(NDArray array) {
        requirePyTorch(array).setRequiresGradient(true); // DJL's own call keeps its cached answer
    }

    /** {@inheritDoc} */
    @Override
    public boolean requiresGradient(NDArray array) {
        PtNDArray pt = requirePyTorch(array);
        // DJL's native requiresGrad answers true for leaves only: ask TorchScript for the others
        return JniUtils.requiresGrad(pt) || kernels().requiresGrad(pt);
    }

    /** {@inheritDoc} */
    @Override
    public NDArray detachedLeaf(NDArray array, NDManager manager) {
        PtNDArray leaf = JniUtils.detachGradient(requirePyTorch(array));
        leaf.attach(manager);
        leaf.setRequiresGradient(true);
        return leaf;
    }

    /** {@inheritDoc} */
    @Override
    public NDArray gradientOrNull(NDArray leaf, NDManager manager) {
        PtNDArray gradient = JniUtils.getGradient(requirePyTorch(leaf));
        if (gradient != null) {
            gradient.attach(manager);
        }
        return gradient;
    }

    /** {@inheritDoc} */
    @Override
    public void backward(NDArray output, NDArray gradient, boolean keepGraph) {
        JniUtils.backward(requirePyTorch(output), requirePyTorch(gradient), keepGraph, false);
    }

    /** {@inheritDoc} */
    @Override
    public List<NDArray> backwardTo(
            NDList outputs, NDList gradients, NDList inputs, NDList parameters, NDManager manager) {
        for (NDList list : List.of(outputs, gradients, inputs, parameters)) {
            for (NDArray array : list) {
                requirePyTorch(array);
            }
        }
        NDList found = kernels().backwardTo(outputs, gradients, inputs, parameters, manager);
        List<NDArray> result = new ArrayList<>(found.size());
        for (NDArray gradient : found) {
            if (gradient.getShape().size() == 0 && gradient.getShape().dimension() == 1) {
                gradient.close(); // torch.empty([0]): the graph does not reach this input
                result.add(null);
            } else {
                result.add(gradient);
            }
        }
        return result;
    }

    private NDArray toFp32(PtNDArray array, NDManager resultManager) {
        NDArray detached = JniUtils.detachGradient(array);
        detached.attach(resultManager);
        NDArray fp32 = cast(detached, Precision.FP32, MemoryLayout.CONTIGUOUS, resultManager);
        if (fp32 != detached) {
            detached.close();
        }
        return fp32;
    }

    /**
     * {@inheritDoc}
     *
     * <p>On the CPU, what oneDNN runs under the ISA cap in force ({@link OneDnnIsa}), not the CPU's
     * flags alone: under a cap below AVX512_CORE_BF16, bf16 is emulated and {@code auto} picks
     * fp32; so it does where libtorch's oneDNN is off ({@link HiddenCacheCure}).
     */
    @Override
    public DeviceCapabilities capabilities(Device device) {
        // the cap and the switch are part of the answer: djl-amp may set them after a first answer
        return capabilities.computeIfAbsent(
                device + "|" + OneDnnIsa.capInForce() + "|" + LibtorchOneDnn.usedByTraining(),
                k -> HardwareCapabilities.of(device));
    }

    /**
     * {@inheritDoc}
     *
     * <p>Here: where a kept verdict says oneDNN's kernels are wrong on this machine, {@code
     * ONEDNN_MAX_CPU_ISA=AVX2} set in this process before oneDNN's first kernel ({@link
     * OneDnnCure}); then, where the CPU's cache topology is hidden, libtorch's oneDNN off for the
     * process ({@link HiddenCacheCure}). In this order: the cap's probe reads oneDNN's own report
     * of a convolution, which needs oneDNN on.
     */
    @Override
    public void preparePlatform(boolean cureAllowed) {
        OneDnnCure.cureOnce(cureAllowed, () -> OneDnnCure.keptUnsound(this));
        HiddenCacheCure.cureOnce(cureAllowed);
    }

    /** {@inheritDoc} */
    @Override
    public String kernelEnvironment() {
        return getEngineName()
                + " "
                + Engine.getEngine(getEngineName()).getVersion()
                + ", "
                + OneDnnIsa.describe()
                + ", oneDNN "
                + (LibtorchOneDnn.usedByTraining() ? "on" : "off");
    }

    /** {@inheritDoc} */
    @Override
    public void requireDjlSafe(NDArray array, String operation) {
        if (precisionOf(array) == Precision.BF16) {
            throw new AmpException(
                    "Refusing to pass the bfloat16 array '"
                            + describe(array)
                            + "' to DJL's "
                            + operation
                            + ": DJL's PyTorch engine cannot express bfloat16 and terminates the"
                            + " JVM there. Cast it to fp32 first (AmpBackend.cast(array,"
                            + " Precision.FP32, manager)), or keep the block that produced it in"
                            + " fp32 through the precision policy.");
        }
    }

    /**
     * {@inheritDoc}
     *
     * <p>True for a {@code PtSymbolBlock} (a TorchScript module: its forward is libtorch's
     * interpreter, through which autocast reaches every operation), and for DJL's {@code LSTM} and
     * {@code RNN} (their Java code reads the parameters and makes fp32 zero states, then hands
     * everything to one libtorch call, reading no array's data type), and for the DJL composites
     * {@code AutocastSafeComposites} lists (DeepAR's training network), each of exactly that class:
     * a subclass may override the forward. False everywhere when libtorch's autocast cannot be
     * reached through JNA.
     */
    @Override
    public boolean supportsEngineAutocast(Block block) {
        Class<?> type = block.getClass();
        boolean engineCode =
                type == PtSymbolBlock.class
                        || type == LSTM.class
                        || type == RNN.class
                        || AutocastSafeComposites.contains(type);
        return engineCode && LibtorchAutocast.isAvailable();
    }

    /**
     * {@inheritDoc}
     *
     * <p>On a GPU, libtorch's autocast casts the operands of cuDNN's recurrent kernel to fp16
     * whatever the autocast precision (ATen's {@code cudnn/AutocastRNN.cpp}), so DJL's recurrent
     * blocks under a bfloat16 policy would compute in fp16 with no loss scaling to keep their
     * gradients from underflowing: a block that is one or holds one (a user's block around an
     * {@code LSTM}, where a {@code GRU} inside would be cast too) is refused. A TorchScript
     * module's recurrent layers cannot be seen from here and are not refused. Under a float16
     * policy they compute in fp16 with the policy's loss scaling, as PyTorch's autocast does.
     */
    @Override
    public String engineAutocastRefusal(Block block, Device device, Precision precision) {
        if (device.isGpu() && precision == Precision.BF16 && hasRecurrentBlock(block)) {
            return "libtorch's CUDA autocast runs cuDNN's recurrent kernels in fp16 whatever the"
                    + " autocast precision, and a bfloat16 policy has no loss scaling to keep fp16"
                    + " gradients from underflowing; the policy mixed_float16 computes it in 16 bits"
                    + " with loss scaling";
        }
        return null;
    }

    /**
     * Whether {@code block} is one of DJL's recurrent blocks or holds one (a user's READ block).
     */
    private static boolean hasRecurrentBlock(Block block) {
        if (block instanceof RecurrentBlock) {
            return true;
        }
        for (Pair<String, Block> child : block.getChildren()) {
            if (hasRecurrentBlock(child.getValue())) {
                return true;
            }
        }
        return false;
    }

    /** {@inheritDoc} */
    @Override
    public Block recordingForCheck(Block block) {
        return block instanceof PtSymbolBlock
                ? new RecordingModule((PtSymbolBlock) block)
                : AmpBackend.super.recordingForCheck(block);
    }

    /** {@inheritDoc} */
    @Override
    public boolean computesWithOwnParameters(Block block) {
        return block instanceof PtSymbolBlock;
    }

    /** {@inheritDoc} */
    @Override
    public <T> T withEngineAutocast(Device device, Precision precision, Supplier<T> forward) {
        return LibtorchAutocast.get().run(device, precision, forward);
    }

    private AmpKernels kernels() {
        AmpKernels loaded = kernels;
        if (loaded == null) {
            synchronized (this) {
                loaded = kernels;
                if (loaded == null) {
                    loaded = AmpKernels.load();
                    kernels = loaded;
                }
            }
        }
        return loaded;
    }

    private static PtNDArray requirePyTorch(NDArray array) {
        if (array instanceof PtNDArray) {
            return (PtNDArray) array;
        }
        throw new AmpException(
                "djl-amp's PyTorch backend got an array of the engine '"
                        + array.getManager().getEngine().getEngineName()
                        + "'; create it with a PyTorch NDManager");
    }

    private static PtNDArray[] requirePyTorch(NDList arrays) {
        PtNDArray[] result = new PtNDArray[arrays.size()];
        for (int i = 0; i < result.length; i++) {
            result[i] = requirePyTorch(arrays.get(i));
        }
        return result;
    }

    private static PtNDArray requireScalarFp32(NDArray array, String what) {
        if (array.getDataType() != DataType.FLOAT32 || array.size() != 1) {
            throw new AmpException(
                    what
                            + " must be a one-element FLOAT32 array, got "
                            + array.getDataType()
                            + " "
                            + array.getShape());
        }
        return requirePyTorch(array);
    }

    private static String describe(NDArray array) {
        String name = array.getName();
        return (name == null ? "unnamed" : name) + "' shape '" + array.getShape();
    }

    /** {@inheritDoc} */
    @Override
    public void releaseFreedMemory(Device device) {
        FreedMemory.release(device);
    }

    /**
     * A TorchScript module running the graph, one JNI call a forward ({@link PtCompiledForward}).
     *
     * @throws UnsupportedOperationException where this DJL offers no native module call djl-amp can
     *     reach ({@link ModuleCalls}): the forward then runs eagerly
     */
    @Override
    public CompiledForward compileForward(ForwardGraph graph) {
        if (!ModuleCalls.available()) {
            throw new UnsupportedOperationException(
                    "this DJL's PyTorch engine has no PyTorchLibrary.moduleRunMethod(long, String,"
                            + " long[], boolean, boolean) djl-amp can reach, which the compiled"
                            + " forward calls");
        }
        return PtCompiledForward.load(graph);
    }

    /**
     * {@inheritDoc}
     *
     * <p>libtorch's CUDA graphs ({@code at::cuda::CUDAGraph}, reached through JNA): on a CUDA
     * device of a libtorch built with CUDA.
     */
    @Override
    public StepGraphs stepGraphs() {
        return STEP_GRAPHS;
    }
}
