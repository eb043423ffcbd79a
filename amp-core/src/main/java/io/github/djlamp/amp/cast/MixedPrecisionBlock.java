package io.github.djlamp.amp.cast;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.BlockList;
import ai.djl.nn.Parameter;
import ai.djl.nn.ParameterList;
import ai.djl.training.ParameterStore;
import ai.djl.training.initializer.Initializer;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.AmpException;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.verify.CanonicalKernels;
import io.github.djlamp.amp.verify.KernelVerdict;
import io.github.djlamp.amp.verify.KernelVerdicts;
import io.github.djlamp.amp.verify.KernelVerification;
import io.github.djlamp.amp.verify.KernelVerifier;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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
 */
public final class MixedPrecisionBlock implements Block {

    private static final Logger logger = LoggerFactory.getLogger(MixedPrecisionBlock.class);

    private final Block original;
    private final PrecisionPolicy policy;
    private final MemoryLayout lowLayout;
    private final Map<Device, Resolved> resolved = new ConcurrentHashMap<>();
    private volatile AmpBackend backend;
    private volatile WeightCastCache cache;
    private volatile ParameterStore trainingStore;
    private volatile BufferSnapshot bufferSnapshot;
    private volatile boolean mastersChecked;
    private volatile int treeVersion;
    private final AtomicLong trainingForwards = new AtomicLong();
    private volatile Runnable beforeSave;
    private final KernelVerification verification;
    private volatile KernelVerifier verifier;

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
     * @throws io.github.djlamp.amp.AmpException when an override would hand bf16 arrays to a block
     *     that may call softmax (which terminates the JVM in DJL's PyTorch engine)
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
     * @throws IllegalArgumentException when an override of the policy names no block in the tree
     * @throws io.github.djlamp.amp.AmpException when an override would hand bf16 arrays to a block
     *     that may call softmax (which terminates the JVM in DJL's PyTorch engine)
     */
    public MixedPrecisionBlock(
            Block original,
            PrecisionPolicy policy,
            MemoryLayout lowLayout,
            KernelVerification verification) {
        this.original = Objects.requireNonNull(original, "original");
        this.policy = Objects.requireNonNull(policy, "policy");
        this.lowLayout = Objects.requireNonNull(lowLayout, "lowLayout");
        this.verification = Objects.requireNonNull(verification, "verification");
        if (original instanceof MixedPrecisionBlock) {
            throw new IllegalArgumentException(
                    "The block is already a MixedPrecisionBlock; wrap the original block once");
        }
        policy.validateAgainst(original);
        if (!policy.isAuto()) {
            ShadowTree.build(original, policy); // rejects now what the first forward would
        }
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
     */
    public PrecisionPolicy resolvePolicy(Device device, NDManager manager) {
        return resolved(device, manager).policy;
    }

    /**
     * Returns the cast cache, or null before the first forward.
     *
     * @return the weight cast cache
     */
    public WeightCastCache getCastCache() {
        return cache;
    }

    /**
     * Returns the parameter store of the last training forward: the trainer's own, through which
     * every device's copy of every parameter (and its gradient) is reached.
     *
     * @return the store, or null before the first training forward
     */
    public ParameterStore getTrainingStore() {
        return trainingStore;
    }

    /**
     * Returns a number that changes each time a forward pass finds that the user changed the
     * wrapped tree (a new head after {@code removeLastBlock()} and {@code add(...)}), so that what
     * lists the tree's parameters lists them again.
     *
     * @return the version of the tree the last forward ran
     */
    public int getTreeVersion() {
        return treeVersion;
    }

    /**
     * Returns how many training forward passes this block has run: new gradients can only have come
     * from one of them.
     *
     * @return the count of forward passes with {@code training} true
     */
    public long getTrainingForwardCount() {
        return trainingForwards.get();
    }

    /**
     * Makes every training forward copy the running statistics (BatchNorm) first, so that a step
     * skipped for overflow can restore them: djl-amp's trainer glue turns this on whenever steps
     * can be skipped.
     *
     * @return the snapshot the forward passes fill
     */
    public BufferSnapshot enableBufferSnapshots() {
        if (bufferSnapshot == null) {
            bufferSnapshot = new BufferSnapshot();
        }
        return bufferSnapshot;
    }

    /** {@inheritDoc} */
    @Override
    public NDList forward(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        if (!original.isInitialized()) {
            original.initialize(parameterStore.getManager(), DataType.FLOAT32, inputs.getShapes());
        }
        NDManager stepManager = inputs.head().getManager();
        Resolved r = current(inputs.head().getDevice(), stepManager);
        requireFp32Masters();
        if (training) {
            trainingForwards.incrementAndGet();
            trainingStore = parameterStore;
            BufferSnapshot snapshot = bufferSnapshot;
            if (snapshot != null) {
                snapshot.take(parameterStore, original, inputs.head().getDevice(), backend);
            }
        }
        Precision compute = r.policy.getComputePrecision();
        if (compute == Precision.FP32) {
            return original.forward(parameterStore, inputs, training, params);
        }
        if (training) {
            // the step's manager (the batch's in EasyTrain) is closed after the step
            return runShadow(r, parameterStore, inputs, true, params, stepManager, compute);
        }
        // Inference: the input's manager may live long (a Predictor with a NoopTranslator, the
        // user's own manager), so the per-call casts and 16-bit intermediates go on a manager of
        // their own, freed here; only the outputs move to the input's manager.
        try (NDManager call = stepManager.newSubManager()) {
            NDList outputs = runShadow(r, parameterStore, inputs, false, params, call, compute);
            for (NDArray output : outputs) {
                if (output.getManager() == call) {
                    output.attach(stepManager);
                }
            }
            return outputs;
        }
    }

    private NDList runShadow(
            Resolved r,
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params,
            NDManager stepManager,
            Precision compute) {
        CastingParameterStore casting =
                new CastingParameterStore(
                        parameterStore, backend, cache, compute, lowLayout, stepManager, verifier);
        NDList outputs = r.shadow.forward(casting, inputs, training, params);
        NDList fp32 = casting.toFp32(outputs);
        IntermediateRelease.closeConsumed(outputs, inputs, fp32);
        return fp32;
    }

    /**
     * Returns the resolved policy and shadow tree for a device, rebuilt when the user has changed
     * the tree since (a new head after {@code removeLastBlock()} and {@code add(...)}).
     */
    private Resolved current(Device device, NDManager manager) {
        Resolved r = resolved(device, manager);
        if (r.structure.isCurrent()) {
            return r;
        }
        synchronized (this) {
            policy.validateAgainst(original);
            resolved.clear();
            mastersChecked = false;
            treeVersion++;
            if (bufferSnapshot != null) {
                bufferSnapshot.forgetTree();
            }
        }
        return resolved(device, manager);
    }

    /**
     * Refuses 16-bit master weights: djl-amp keeps masters in fp32 and casts them itself, and
     * 16-bit masters would lose every small update.
     */
    private void requireFp32Masters() {
        if (mastersChecked) {
            return;
        }
        for (Pair<String, Parameter> pair : original.getParameters()) {
            Parameter parameter = pair.getValue();
            if (!parameter.isInitialized()) {
                continue;
            }
            Precision precision = backend.precisionOf(parameter.getArray());
            if (precision == Precision.FP16 || precision == Precision.BF16) {
                throw fp16Masters(
                        "parameter '" + pair.getKey() + "' is " + precision.canonicalName());
            }
        }
        mastersChecked = true;
    }

    private static AmpException fp16Masters(String what) {
        return new AmpException(
                "djl-amp needs fp32 master weights, but "
                        + what
                        + ": it keeps the parameters in fp32 and casts them to 16 bits for each"
                        + " step itself, and 16-bit masters lose small updates. Remove"
                        + " model.setDataType(DataType.FLOAT16) (or BFLOAT16) and load or"
                        + " initialize the model in fp32; choose the compute precision with the"
                        + " policy instead, e.g. Amp.wrap(block, \"mixed_float16\").");
    }

    private Resolved resolved(Device device, NDManager manager) {
        Resolved r = resolved.get(device);
        if (r != null) {
            return r;
        }
        if (backend == null) {
            synchronized (this) {
                if (backend == null) {
                    AmpBackend found = AmpBackends.forManager(manager);
                    cache = new WeightCastCache(found);
                    if (verification == KernelVerification.ON) {
                        verifier = new KernelVerifier(found);
                    }
                    backend = found;
                }
            }
        }
        return resolved.computeIfAbsent(
                device,
                d -> {
                    DeviceCapabilities caps = backend.capabilities(d);
                    if (policy.isAuto() && verification == KernelVerification.ON) {
                        caps = confirmAuto(caps, manager);
                    }
                    PrecisionPolicy concrete = policy.isAuto() ? policy.resolveAuto(caps) : policy;
                    DeviceSupport.check(concrete, caps);
                    warnIfMostlyFp32(concrete);
                    return new Resolved(
                            concrete,
                            ShadowTree.build(original, concrete),
                            TreeStructure.of(original),
                            caps.getReason());
                });
    }

    /**
     * Under {@code auto}, a 16-bit precision the device's flags recommend is taken only when the
     * canonical layers' kernels pass the check in it.
     */
    private DeviceCapabilities confirmAuto(DeviceCapabilities caps, NDManager manager) {
        DeviceCapabilities confirmed = CanonicalKernels.confirm(backend, caps, manager);
        if (confirmed != caps) {
            logger.warn("djl-amp: auto on {}: {}", caps.getDevice(), confirmed.getReason());
        }
        return confirmed;
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
        return policy.isAuto() ? resolved(device, manager).reason : "configured";
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
        Set<String> paths = new HashSet<>();
        for (Pair<String, Block> pair : allBlocks(original, "")) {
            paths.add(pair.getKey().isEmpty() ? "root" : pair.getKey());
        }
        Set<Precision> precisions = new HashSet<>();
        for (Resolved r : resolved.values()) {
            precisions.add(r.policy.getComputePrecision());
        }
        List<KernelVerdict> mine = new ArrayList<>();
        for (KernelVerdict verdict : KernelVerdicts.all()) {
            if (!precisions.contains(verdict.getPrecision())) {
                continue; // another model's, of the same layer names, in another precision
            }
            for (String path : verdict.getPaths()) {
                if (paths.contains(path)) {
                    mine.add(verdict);
                    break;
                }
            }
        }
        return mine;
    }

    private static List<Pair<String, Block>> allBlocks(Block block, String path) {
        List<Pair<String, Block>> all = new ArrayList<>();
        all.add(new Pair<>(path, block));
        for (Pair<String, Block> child : block.getChildren()) {
            all.addAll(allBlocks(child.getValue(), BlockPaths.child(path, child.getKey())));
        }
        return all;
    }

    private void warnIfMostlyFp32(PrecisionPolicy concrete) {
        if (concrete.getComputePrecision() == Precision.FP32) {
            return;
        }
        PrecisionSummary summary = PrecisionSummary.of(original, concrete);
        if (summary.isMostlyFp32()) {
            logger.warn(
                    "djl-amp: little of this model computes in {}; blocks djl-amp cannot look into"
                            + " run in fp32 (implement io.github.djlamp.amp.policy.LowPrecisionSafe"
                            + " on your own block, or vouch for its class in one line:"
                            + " Amp.wrap(block, \"{}[class:com.example.MyBlock=trusted]\")). {}",
                    concrete.getComputePrecision().canonicalName(),
                    concrete.getName(),
                    summary);
            return;
        }
        List<String> islands = summary.getFp32Islands();
        if (!islands.isEmpty()) {
            logger.warn(
                    "djl-amp: {} unit{} of unknown content run{} in fp32 between 16-bit layers,"
                            + " with a cast on each side: {}. A lambda djl-amp cannot look into"
                            + " may call softmax, so it is kept in fp32, and in a conv net that can"
                            + " cost half the speed. Write activations as DJL's named blocks:"
                            + " add(Activation.reluBlock()) instead of add(Activation::relu), or"
                            + " new LambdaBlock(Activation::relu, \"ReLU\"). {}",
                    islands.size(),
                    islands.size() == 1 ? "" : "s",
                    islands.size() == 1 ? "s" : "",
                    islands,
                    summary);
        } else if (logger.isDebugEnabled()) {
            logger.debug("djl-amp: {}", summary);
        }
    }

    /**
     * Returns which precision each unit of the model computes in on a device, and why, with what
     * the kernel checks decided for the layers that have run.
     *
     * @param device the device
     * @param manager a manager of the engine, to find the engine layer
     * @return the summary under the policy resolved for {@code device}
     */
    public PrecisionSummary getPrecisionSummary(Device device, NDManager manager) {
        return PrecisionSummary.of(original, resolvePolicy(device, manager), getKernelVerdicts());
    }

    /** {@inheritDoc} */
    @Override
    public void setInitializer(Initializer initializer, Parameter.Type type) {
        original.setInitializer(initializer, type);
    }

    /** {@inheritDoc} */
    @Override
    public void setInitializer(Initializer initializer, String paramName) {
        original.setInitializer(initializer, paramName);
    }

    /** {@inheritDoc} */
    @Override
    public void setInitializer(Initializer initializer, Predicate<Parameter> predicate) {
        original.setInitializer(initializer, predicate);
    }

    /** {@inheritDoc} */
    @Override
    public void initialize(NDManager manager, DataType dataType, Shape... inputShapes) {
        if (dataType == DataType.FLOAT16 || dataType == DataType.BFLOAT16) {
            throw fp16Masters("the model initializes its parameters as " + dataType);
        }
        original.initialize(manager, dataType, inputShapes);
    }

    /** {@inheritDoc} */
    @Override
    public boolean isInitialized() {
        return original.isInitialized();
    }

    /** {@inheritDoc} */
    @Override
    public void cast(DataType dataType) {
        original.cast(dataType);
    }

    /** {@inheritDoc} */
    @Override
    public void clear() {
        original.clear();
    }

    /**
     * Sets what runs when {@code Model.save} starts writing this block: djl-amp's trainer glue
     * writes the current loss scaler state into the model's properties there, so that a save made
     * between the scaler's periodic host reads carries the current state.
     *
     * @param action what to run, or null for nothing
     */
    public void setBeforeSave(Runnable action) {
        beforeSave = action;
    }

    /**
     * {@inheritDoc}
     *
     * <p>Also runs the {@link #setBeforeSave before-save action}: DJL's {@code BaseModel.save} asks
     * the block for its inputs just before it writes the model's properties, and nothing else in
     * training asks.
     */
    @Override
    public PairList<String, Shape> describeInput() {
        Runnable action = beforeSave;
        if (action != null) {
            action.run();
        }
        return original.describeInput();
    }

    /** {@inheritDoc} */
    @Override
    public BlockList getChildren() {
        return original.getChildren();
    }

    /** {@inheritDoc} */
    @Override
    public ParameterList getDirectParameters() {
        return original.getDirectParameters();
    }

    /** {@inheritDoc} */
    @Override
    public ParameterList getParameters() {
        return original.getParameters();
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        return original.getOutputShapes(inputShapes);
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes, DataType[] inputDataTypes) {
        return original.getOutputShapes(inputShapes, inputDataTypes);
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getInputShapes() {
        return original.getInputShapes();
    }

    /** {@inheritDoc} */
    @Override
    public DataType[] getOutputDataTypes() {
        return original.getOutputDataTypes();
    }

    /** {@inheritDoc} */
    @Override
    public void saveParameters(DataOutputStream os) throws IOException {
        original.saveParameters(os);
    }

    /** {@inheritDoc} */
    @Override
    public void loadParameters(NDManager manager, DataInputStream is)
            throws IOException, MalformedModelException {
        original.loadParameters(manager, is);
        mastersChecked = false;
    }

    /** {@inheritDoc} */
    @Override
    public void freezeParameters(boolean freeze) {
        original.freezeParameters(freeze);
    }

    /** {@inheritDoc} */
    @Override
    public void freezeParameters(boolean freeze, Predicate<Parameter> pred) {
        original.freezeParameters(freeze, pred);
    }

    /** {@inheritDoc} */
    @Override
    public Map<String, String> getCustomMetadata() {
        return original.getCustomMetadata();
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return "MixedPrecisionBlock[" + policy + "](" + original + ")";
    }

    private static final class Resolved {
        final PrecisionPolicy policy;
        final Block shadow;

        final TreeStructure structure;
        final String reason;

        Resolved(PrecisionPolicy policy, Block shadow, TreeStructure structure, String reason) {
            this.policy = policy;
            this.shadow = shadow;
            this.structure = structure;
            this.reason = reason;
        }
    }
}
