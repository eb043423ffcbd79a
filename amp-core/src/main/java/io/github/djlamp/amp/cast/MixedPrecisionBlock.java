package io.github.djlamp.amp.cast;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.cast.checkpoint.CheckpointPlan;
import io.github.djlamp.amp.cast.checkpoint.Checkpoints;
import io.github.djlamp.amp.cast.internal.TrainingLink;
import io.github.djlamp.amp.cast.strategy.InputPrecisions;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.verify.KernelVerdict;
import io.github.djlamp.amp.verify.KernelVerification;
import io.github.djlamp.amp.verify.KernelVerifier;
import java.io.DataInputStream;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A block that computes in 16 bits while its parameters stay fp32 masters.
 *
 * <p>It is the wrapped block in every respect but forward: the same parameters with the same names,
 * the same initialization, the same saved parameter file. Forward runs a shadow of the block tree
 * in which each leaf computes in the precision the {@link PrecisionPolicy} gives it; each WEIGHT
 * and BIAS of a low-precision leaf is cast once per step per device; activations stay 16-bit
 * between 16-bit leaves; and every floating output is cast back to fp32, so the loss is computed in
 * fp32.
 *
 * <pre>{@code
 * model.setBlock(new MixedPrecisionBlock(block, PrecisionPolicy.named("mixed_bfloat16")));
 * }</pre>
 *
 * <p>The system property {@code djlamp.amp.releaseIntermediates} is read once, when the block is
 * wrapped: {@code false} keeps the wrapper's handle to every intermediate array until the batch
 * closes, as plain DJL does.
 */
public final class MixedPrecisionBlock extends ForwardingBlock {

    /**
     * The system property that turns the compiled forward off for every wrapper made after it is
     * set to {@code false} ({@link #compileForward(boolean)} turns it off for one).
     */
    public static final String COMPILE_PROPERTY = "djlamp.compileForward";

    private final PrecisionPolicy policy;
    private final MemoryLayout lowLayout;
    private final KernelVerification verification;
    private final IntermediateRelease release;
    private final DevicePolicies devices;
    private final Fp32Masters masters;
    private final TrainingLink trainingLink;
    private final Checkpoints checkpoints;
    private final Map<Device, ArithmeticShare> arithmetic = new ConcurrentHashMap<>();
    private final Map<Device, InputPrecisions> outputPrecisions = new ConcurrentHashMap<>();

    /**
     * Wraps a block.
     *
     * <p>16-bit activations and convolution weights use the channels-last memory layout, the one
     * Tensor Cores and oneDNN's bf16 kernels run fastest on.
     *
     * @param original the block to run in mixed precision; it keeps working on its own too
     * @param policy what computes in which precision; "auto" is resolved per device on first use
     * @throws IllegalArgumentException when an override of the policy names no block in the tree
     */
    public MixedPrecisionBlock(Block original, PrecisionPolicy policy) {
        this(original, policy, MemoryLayout.CHANNELS_LAST);
    }

    /**
     * Wraps a block with an explicit memory layout for its 16-bit activations and weights.
     *
     * @param original the block to run in mixed precision; it keeps working on its own too
     * @param policy what computes in which precision; "auto" is resolved per device on first use
     * @param lowLayout the layout of 16-bit inputs and weights of low-precision blocks: {@link
     *     MemoryLayout#CHANNELS_LAST} or {@link MemoryLayout#PRESERVE}
     * @throws IllegalArgumentException when an override of the policy names no block in the tree
     * @throws io.github.djlamp.amp.exception.AmpException when an override would hand bf16 arrays
     *     to a block that may call softmax (which terminates the JVM in DJL's PyTorch engine)
     */
    public MixedPrecisionBlock(Block original, PrecisionPolicy policy, MemoryLayout lowLayout) {
        this(original, policy, lowLayout, KernelVerification.ON);
    }

    /**
     * Wraps a block, choosing whether its 16-bit kernels are checked against fp32 before they are
     * trusted ({@link KernelVerifier}).
     *
     * @param original the block to run in mixed precision; it keeps working on its own too
     * @param policy what computes in which precision; "auto" is resolved per device on first use
     * @param lowLayout the layout of 16-bit inputs and weights of low-precision blocks: {@link
     *     MemoryLayout#CHANNELS_LAST} or {@link MemoryLayout#PRESERVE}
     * @param verification {@link KernelVerification#ON} (the default) to check each 16-bit
     *     convolution and linear kernel at its first use and fall back where one is wrong, {@link
     *     KernelVerification#OFF} to trust the platform
     * @throws NullPointerException naming the argument that is null
     * @throws IllegalArgumentException when an override of the policy names no block in the tree,
     *     or when {@code -Ddjlamp.amp.releaseIntermediates} is neither true nor false
     * @throws io.github.djlamp.amp.exception.AmpException when an override would hand bf16 arrays
     *     to a block that may call softmax (which terminates the JVM in DJL's PyTorch engine)
     */
    public MixedPrecisionBlock(
            Block original,
            PrecisionPolicy policy,
            MemoryLayout lowLayout,
            KernelVerification verification) {
        super(requireArgument(original, "the block to wrap", "build or load the model's block"));
        this.policy =
                requireArgument(
                        policy,
                        "a precision policy",
                        "pass PrecisionPolicy.auto() or PrecisionPolicy.named(\"mixed_bfloat16\")");
        this.lowLayout =
                requireArgument(
                        lowLayout,
                        "a memory layout",
                        "pass MemoryLayout.CHANNELS_LAST (the default) or MemoryLayout.PRESERVE");
        this.verification =
                requireArgument(
                        verification,
                        "a kernel verification setting",
                        "pass KernelVerification.ON (the default) or KernelVerification.OFF");
        if (original instanceof MixedPrecisionBlock) {
            throw new IllegalArgumentException(
                    "The block is already a MixedPrecisionBlock; wrap the original block once");
        }
        // each block's treatment, decided once: read by the validation, the shadow trees, the
        // summary and the fallback WARN (under auto, each device plans its concrete policy)
        ModelPlan plan = ModelPlan.of(policy, original, AmpBackends::supportEngineAutocast);
        plan.validateOverrides();
        checkpoints = new Checkpoints(original, this::forgetShadows);
        release = IntermediateRelease.fromSystemProperty().keeping(checkpoints.tape()::holds);
        if (!policy.isAuto()) {
            // rejects now what the first forward would
            ShadowTree.build(plan, release, CheckpointPlan.NONE, null);
        }
        devices = new DevicePolicies(original, plan, verification, release, checkpoints);
        if (compilesByDefault()) {
            devices.compileWith(lowLayout);
        }
        masters = new Fp32Masters(original);
        trainingLink =
                new TrainingLink(
                        devices::castCache, checkpoints, this::releaseFreedMemoryAfterChecks);
    }

    /** Whether {@value #COMPILE_PROPERTY} leaves the compiled forward on (its default). */
    private static boolean compilesByDefault() {
        String value = System.getProperty(COMPILE_PROPERTY, "true");
        if (!value.equals("true") && !value.equals("false")) {
            throw new IllegalArgumentException(
                    "-D"
                            + COMPILE_PROPERTY
                            + "="
                            + value
                            + " is neither true nor false: set it to false to run every forward"
                            + " eagerly, or leave it unset");
        }
        return value.equals("true");
    }

    /**
     * After a step in which kernel checks ran (the first, and the first at each new input shape):
     * gives back what they made and freed, which the allocators would otherwise keep as the
     * process's peak for the rest of training. One flag read on every other step.
     */
    private void releaseFreedMemoryAfterChecks() {
        KernelVerifier verifier = devices.verifier();
        AmpBackend backend = devices.backend();
        if (verifier != null && backend != null && verifier.takeChecksRun()) {
            for (Device device : devices.resolvedDevices()) {
                backend.releaseFreedMemory(device);
            }
        }
    }

    /** The checkpointing setting changed: every device's shadow tree is built again. */
    private void forgetShadows() {
        DevicePolicies resolved = devices;
        if (resolved != null) {
            resolved.forget();
        }
    }

    private static void requireDeviceAndManager(String method, Device device, NDManager manager) {
        Objects.requireNonNull(
                device,
                () ->
                        "MixedPrecisionBlock."
                                + method
                                + " needs the device, got null: pass the one the model trains or"
                                + " predicts on, e.g. trainer.getDevices()[0] or"
                                + " model.getNDManager().getDevice()");
        Objects.requireNonNull(
                manager,
                () ->
                        "MixedPrecisionBlock."
                                + method
                                + " needs a manager of the engine, got null: pass e.g."
                                + " model.getNDManager() or trainer.getManager()");
    }

    private static <T> T requireArgument(T value, String what, String fix) {
        return Objects.requireNonNull(
                value, () -> "MixedPrecisionBlock needs " + what + ", got null: " + fix);
    }

    /**
     * Returns the wrapped block.
     *
     * @return the original block
     */
    public Block getOriginal() {
        return original;
    }

    /**
     * Returns the policy as configured ("auto" stays "auto").
     *
     * @return the policy
     */
    public PrecisionPolicy getPolicy() {
        return policy;
    }

    /**
     * Returns the concrete policy used on a device: "auto" resolved through the engine layer's
     * capabilities, any other policy as it is.
     *
     * @param device the device
     * @param manager a manager of the engine, to find the engine layer
     * @return the concrete policy
     * @throws NullPointerException when {@code device} or {@code manager} is null, naming it
     */
    public PrecisionPolicy resolvePolicy(Device device, NDManager manager) {
        requireDeviceAndManager("resolvePolicy", device, manager);
        return devices.get(device, manager).policy();
    }

    /**
     * Returns what this block shares with djl-amp's trainer glue (the training store, the count of
     * training forwards, the tree version, the cast cache, buffer snapshots, the before-save
     * action). Not part of djl-amp's API: its type lives in a package the module descriptor does
     * not export.
     *
     * @return the block's link to the trainer glue
     */
    @SuppressWarnings("exports") // public for the train package only
    public TrainingLink getTrainingLink() {
        return trainingLink;
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        trainingLink.forwardBegins(parameterStore, inputs, null, params);
        return forward(parameterStore, inputs, null, training, params);
    }

    /**
     * A training forward with labels, as DJL's {@code Trainer.forward(data, labels)} (and so {@code
     * EasyTrain}) runs it: the labels reach the wrapped block's own labels overload (DJL's {@code
     * EncoderDecoder} feeds them to its decoder), cast like the data where the block computes in 16
     * bits. A block that does not override that overload runs as a training forward of the data, as
     * in DJL. Under {@code EasyTrain.fit}, where the step can be captured (a CUDA device, ...), the
     * whole training step runs here and is replayed from a graph (README, "The captured step").
     *
     * @param parameterStore the parameter store
     * @param data the input data
     * @param labels the labels, handed to the wrapped block
     * @param params optional parameters
     * @return the outputs, floating ones in fp32
     */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList data,
            NDList labels,
            PairList<String, Object> params) {
        // EasyTrain.fit's step, captured whole where it can be (train.EasyTrainCapture)
        NDList stepped = trainingLink.forwardBegins(parameterStore, data, labels, params);
        return stepped != null ? stepped : forward(parameterStore, data, labels, true, params);
    }

    /**
     * Turns the compiled forward on (the default, unless {@value #COMPILE_PROPERTY} is false) or
     * off: each longest run of a SequentialBlock's children that djl-amp can compile (DJL's
     * convolutions, linear layers, BatchNorm, activations, flatten and pooling lambdas, the plain
     * containers, ResNetV1's residual join) runs as one native call of the engine, every operation
     * in the precision and layout its eager stage computes in; the backward stays the engine's
     * autograd. Every other block runs as before, and the first forward on each device says which
     * and why. The first forward of each input shape runs eagerly, where the 16-bit kernels are
     * checked and the arithmetic counted; a layer the check keeps in fp32 runs in fp32 in the
     * compiled run too. With checkpointing on nothing is compiled.
     *
     * @param on whether to compile
     * @return this block
     */
    public MixedPrecisionBlock compileForward(boolean on) {
        devices.compileWith(on ? lowLayout : null);
        return this;
    }

    /**
     * Returns whether the whole tree's forward on {@code device} runs as one native call.
     *
     * @param device the device
     * @return true once a forward there ran the whole tree compiled
     */
    public boolean isForwardCompiled(Device device) {
        CompiledRuns runs = compiling(device);
        return runs != null && runs.isWholeTreeCompiled();
    }

    /**
     * Returns which blocks run eagerly on {@code device} with the compiled forward on, and why.
     *
     * @param device the device
     * @return each such block's path and reason; null where the whole tree runs compiled, the
     *     compiled forward is off, or no forward has run there yet
     */
    public String compiledForwardRefusal(Device device) {
        CompiledRuns runs = compiling(device);
        if (runs == null) {
            return devices.compiles() && devices.peek(device) != null
                    ? "checkpointing is on"
                    : null;
        }
        return runs.refusal();
    }

    /**
     * Returns the runs of blocks that have run as one native call each on {@code device}, by the
     * paths of their first and last block.
     *
     * @param device the device
     * @return the runs, empty where none has run compiled or the compiled forward is off
     */
    public List<String> compiledRuns(Device device) {
        CompiledRuns runs = compiling(device);
        return runs == null ? List.of() : runs.ranCompiled();
    }

    private CompiledRuns compiling(Device device) {
        DevicePolicies.Resolved r = devices.peek(device);
        return r == null ? null : r.compiled();
    }

    /** Both overloads: {@code labels} null for the one without (then as {@code training} says). */
    private NDList forward(
            ParameterStore parameterStore,
            NDList inputs,
            NDList labels,
            boolean training,
            PairList<String, Object> params) {
        if (!original.isInitialized()) {
            original.initialize(parameterStore.getManager(), DataType.FLOAT32, inputs.getShapes());
        }
        NDManager stepManager = inputs.head().getManager();
        Device device = inputs.head().getDevice();
        DevicePolicies.Resolved r = current(device, stepManager);
        masters.require(devices.backend());
        if (training) {
            trainingLink.recordTrainingForward(parameterStore, original, device, devices.backend());
        }
        Precision compute = r.policy().getComputePrecision();
        boolean checkpointing = training && checkpoints.plan().isEnabled();
        if (compute == Precision.FP32
                && !checkpointing
                && !release.isEnabled()
                && r.compiled() == null) {
            return labels == null
                    ? original.forward(parameterStore, inputs, training, params)
                    : original.forward(parameterStore, inputs, labels, params);
        }
        // fp32 runs the shadow too, casting nothing, for the release: bitwise the original's
        // results, without DJL's handle on every activation until the batch closes
        if (training) {
            // the step's manager (the batch's in EasyTrain) is closed after the step
            if (checkpointing) {
                checkpoints.tape().noteCallers(inputs);
            }
            NDList outputs =
                    runShadow(
                            r, parameterStore, inputs, labels, true, params, stepManager, compute);
            if (checkpointing) {
                checkpoints.tape().noteCallers(outputs);
            }
            return outputs;
        }
        // Inference: the input's manager may live long (a Predictor with a NoopTranslator, the
        // user's own manager), so the per-call casts and 16-bit intermediates go on a manager of
        // their own, freed here; only the outputs move to the input's manager.
        try (NDManager call = stepManager.newSubManager()) {
            NDList outputs =
                    runShadow(r, parameterStore, inputs, null, false, params, call, compute);
            for (NDArray output : outputs) {
                if (output.getManager() == call) {
                    output.attach(stepManager);
                }
            }
            return outputs;
        }
    }

    private NDList runShadow(
            DevicePolicies.Resolved r,
            ParameterStore parameterStore,
            NDList inputs,
            NDList labels,
            boolean training,
            PairList<String, Object> params,
            NDManager stepManager,
            Precision compute) {
        CastingParameterStore casting =
                new CastingParameterStore(
                        parameterStore,
                        devices.backend(),
                        devices.castCache(),
                        compute,
                        lowLayout,
                        stepManager,
                        devices.verifier());
        ArithmeticShare counting = null;
        Device device = inputs.head().getDevice();
        if (!arithmetic.containsKey(device)) {
            counting = new ArithmeticShare(compute);
            casting.countArithmetic(counting);
        }
        NDList outputs =
                labels == null
                        ? r.shadow().forward(casting, inputs, training, params)
                        : r.shadow().forward(casting, inputs, labels, params);
        if (counting != null
                && !counting.isDeferred()
                && arithmetic.putIfAbsent(device, counting) == null) {
            Fp32FallbackWarning.warnIfAny(r.plan(), counting);
        }
        NDList fp32 =
                casting.toFp32(
                        outputs,
                        outputPrecisions.computeIfAbsent(
                                device, d -> new InputPrecisions(devices.backend())));
        release.closeConsumed(outputs, inputs, fp32);
        return fp32;
    }

    /**
     * Returns the resolved policy and shadow tree for a device, rebuilt when the user has changed
     * the tree since (a new head after {@code removeLastBlock()} and {@code add(...)}).
     */
    /** Returns the shadow tree this block runs on {@code device} (tests). */
    Block shadowOn(Device device, NDManager manager) {
        return current(device, manager).shadow();
    }

    private DevicePolicies.Resolved current(Device device, NDManager manager) {
        DevicePolicies.Resolved r = devices.get(device, manager);
        if (r.structure().isCurrent()) {
            return r;
        }
        synchronized (this) {
            ModelPlan plan = ModelPlan.of(policy, original, AmpBackends::supportEngineAutocast);
            plan.validateOverrides();
            checkpoints.apply(checkpoints.getSetting()); // the stages may have changed
            devices.treeChanged(plan);
            masters.forget();
            arithmetic.clear();
            trainingLink.treeChanged();
        }
        return devices.get(device, manager);
    }

    /**
     * Returns why the policy in use on a device was chosen: under {@code auto}, what the device
     * offers and what the check of its kernels found; otherwise that it was configured.
     *
     * @param device the device
     * @param manager a manager of the engine, to find the engine layer
     * @return the reason, in one sentence a user can read
     */
    public String describePolicyChoice(Device device, NDManager manager) {
        return policy.isAuto() ? devices.get(device, manager).reason() : "configured";
    }

    /**
     * Returns whether this wrapper checks its 16-bit kernels before trusting them.
     *
     * @return the setting it was made with
     */
    public KernelVerification getKernelVerification() {
        return verification;
    }

    /**
     * Returns the kernel checks' verdicts for the layers of this model that have run so far, in the
     * precision this wrapper computes in, each with the paths of the layers (of any model in this
     * process) that share its signature.
     *
     * @return the verdicts whose paths include a layer of this model, in the order checked
     */
    public List<KernelVerdict> getKernelVerdicts() {
        return ModelKernelVerdicts.of(original, devices.computePrecisions());
    }

    /**
     * Returns how much of the model's arithmetic computed in 16 bits in its first forward on a
     * device, unit by unit, counted from the shapes that ran.
     *
     * @param device the device
     * @return the share, or null before the first forward on {@code device} and for a model that
     *     computes in fp32 there
     */
    public ArithmeticShare getArithmeticShare(Device device) {
        return arithmetic.get(device);
    }

    /**
     * Returns which precision each unit of the model computes in on a device, and why, with what
     * the kernel checks decided for the layers that have run.
     *
     * @param device the device
     * @param manager a manager of the engine, to find the engine layer
     * @return the summary under the policy resolved for {@code device}
     * @throws NullPointerException when {@code device} or {@code manager} is null, naming it
     */
    public PrecisionSummary getPrecisionSummary(Device device, NDManager manager) {
        requireDeviceAndManager("getPrecisionSummary", device, manager);
        DevicePolicies.Resolved r = devices.get(device, manager);
        // the plan the device's shadow tree was built from; for a tree changed since, the plan the
        // next forward will build its shadow from
        boolean current = r.structure().isCurrent();
        ModelPlan plan =
                current
                        ? r.plan()
                        : ModelPlan.of(r.policy(), original, AmpBackends::supportEngineAutocast);
        return PrecisionSummary.of(
                plan,
                getKernelVerdicts(),
                checkpoints.plan(),
                current ? r.engineFallbacks() : Map.of());
    }

    /**
     * {@inheritDoc}
     *
     * @throws io.github.djlamp.amp.exception.AmpException for FLOAT16 and BFLOAT16: djl-amp keeps
     *     fp32 master weights
     */
    @Override
    public void initialize(NDManager manager, DataType dataType, Shape... inputShapes) {
        Fp32Masters.requireFp32Initialization(dataType);
        original.initialize(manager, dataType, inputShapes);
    }

    /**
     * {@inheritDoc}
     *
     * <p>Also runs the trainer glue's before-save action ({@code TrainingLink.setBeforeSave}):
     * DJL's {@code BaseModel.save} asks the block for its inputs just before it writes the model's
     * properties, and nothing else in training asks.
     */
    @Override
    public PairList<String, Shape> describeInput() {
        trainingLink.runBeforeSave();
        return original.describeInput();
    }

    /** {@inheritDoc} */
    @Override
    public void loadParameters(NDManager manager, DataInputStream is)
            throws IOException, MalformedModelException {
        original.loadParameters(manager, is);
        masters.forget();
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return "MixedPrecisionBlock[" + policy + "](" + original + ")";
    }
}
