package io.github.djlamp.amp.doctor;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.TrainingConfig;
import ai.djl.training.dataset.Batch;
import ai.djl.training.dataset.Dataset;
import ai.djl.translate.TranslateException;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * Learns what mixed precision gains for a model on this hardware by trying it: trains the model
 * once per precision, from the same initial weights on the same data in the same order, and reports
 * images per second, the peak memory of a training step, test accuracy, the loss scale and skipped
 * steps of each run, and the speedup.
 *
 * <pre>{@code
 * DoctorReport report = AmpDoctor.builder()
 *         .setModelFactory(() -> ResNetV1.builder().setImageShape(new Shape(1, 28, 28))
 *                 .setNumLayers(20).setOutSize(10).build())
 *         .setTrainingConfig(() -> new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss()))
 *         .setDataset(train, test)
 *         .optEpochs(1)
 *         .build()
 *         .run();
 * System.out.println(report.toTable());
 * }</pre>
 *
 * <p>By default it compares {@code float32} with {@code auto}. The {@code float32} baseline trains
 * through plain DJL (the user's block and configuration, no djl-amp in the way), so the comparison
 * is with what the user runs today; every other policy trains through {@link
 * io.github.djlamp.amp.Amp#wrap} and {@link io.github.djlamp.amp.Amp#configure}. Each run is {@code
 * EasyTrain.fit}'s loop (batch, step, close; {@code onEpoch} after each epoch) with a clock and a
 * {@link MemoryProbe} around every step, followed by one pass over the test set with DJL's {@link
 * ai.djl.training.evaluator.Accuracy}. The first steps of a run (the warm-up) are left out of its
 * throughput.
 *
 * <p>Before the first run the doctor runs the {@link PlatformCheck} (once per JVM, in a child JVM:
 * a few seconds), so that a platform whose kernels compute wrong or kill the JVM is named, with its
 * cure, before a training run meets it; with progress on, its report is printed first. The report
 * carries its result ({@link DoctorReport#getPlatformReport()}).
 *
 * <p>The runs share the JVM, one after another. Before each run the probe hands memory the
 * allocators keep cached back (glibc's {@code malloc_trim} on a CPU, libtorch's {@code emptyCache}
 * on a CUDA GPU), so a run's memory is its own; the JIT and the engine's other state still carry
 * over from one run to the next.
 */
public final class AmpDoctor {

    /** The policies compared by default: the fp32 baseline and what the hardware recommends. */
    public static final List<String> DEFAULT_PRECISIONS = List.of("float32", "auto");

    /** Extra steps after the evaluation on which the memory of one step is measured. */
    public static final int MEMORY_STEPS = 3;

    /** Steps left out of each run's throughput by default. */
    public static final int DEFAULT_WARMUP_STEPS = 5;

    private final Supplier<Block> modelFactory;
    private final Supplier<TrainingConfig> trainingConfig;
    private final Set<Object> givenBlocks = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Set<Object> givenConfigs = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Dataset trainSet;
    private final Dataset testSet;
    private final int epochs;
    private final List<PrecisionPolicy> precisions;
    private final Checkpointing checkpointing;
    private final int seed;
    private final int warmupSteps;
    private final boolean progress;
    private final String engineName;
    private final String modelName;
    private final LossScaling lossScaling;
    private final Shape inputShape;
    private final Function<Device, MemoryProbe> memoryProbes;
    private final boolean platformCheck;
    private final PlatformReport platformReport;

    private AmpDoctor(Builder builder, Shape inputShape) {
        this.modelFactory = builder.modelFactory;
        this.trainingConfig = builder.trainingConfig;
        this.trainSet = builder.trainSet;
        this.testSet = builder.testSet;
        this.epochs = builder.epochs;
        this.precisions = Collections.unmodifiableList(new ArrayList<>(builder.precisions));
        this.checkpointing = builder.checkpointing;
        this.seed = builder.seed;
        this.warmupSteps = builder.warmupSteps;
        this.progress = builder.progress;
        this.engineName = builder.engineName;
        this.modelName = builder.modelName;
        this.lossScaling = builder.lossScaling;
        this.inputShape = inputShape;
        this.memoryProbes = builder.memoryProbes;
        this.platformCheck = builder.platformCheck;
        this.platformReport = builder.platformReport;
    }

    /**
     * Creates a builder.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Trains once per precision and reports.
     *
     * @return the report, one run per precision in the order given
     * @throws IOException if a dataset cannot be read
     * @throws TranslateException if a dataset's pipeline fails
     */
    public DoctorReport run() throws IOException, TranslateException {
        PlatformReport platform = platformReport;
        if (platform == null && platformCheck) {
            platform =
                    engineName == null
                            ? PlatformCheck.cached()
                            : PlatformCheck.builder().optEngine(engineName).build().check();
            if (progress) {
                System.out.println(platform);
            }
        }
        List<RunResult> runs = new ArrayList<>();
        givenBlocks.clear();
        givenConfigs.clear();
        List<DoctorRun> planned = new ArrayList<>();
        int total = precisions.size();
        for (PrecisionPolicy policy : precisions) {
            if (checkpointing.isEnabled() && !DoctorRun.isPlain(policy)) {
                total++;
            }
        }
        for (PrecisionPolicy policy : precisions) {
            planned.add(
                    new DoctorRun(
                            this,
                            policy,
                            Checkpointing.none(),
                            "Run " + (planned.size() + 1) + "/" + total));
            if (checkpointing.isEnabled() && !DoctorRun.isPlain(policy)) {
                planned.add(
                        new DoctorRun(
                                this,
                                policy,
                                checkpointing,
                                "Run " + (planned.size() + 1) + "/" + total));
            }
        }
        for (DoctorRun run : planned) {
            runs.add(run.run());
            // let the next run start from a collected heap, as a fresh run would
            System.gc();
        }
        Device device = runs.get(0).getDevice();
        return new DoctorReport(runs, device, capabilities(device), platform);
    }

    /**
     * The model factory's block for one run, refused when the factory handed out the same block
     * before: the first run's trainer closed its parameters' arrays.
     */
    Block newBlock() {
        Block block = modelFactory.get();
        if (block == null || !givenBlocks.add(block)) {
            throw new IllegalArgumentException(
                    "The model factory returned "
                            + (block == null ? "null" : "the same block for a second run")
                            + ": AmpDoctor trains one new model per run, and the first run's"
                            + " trainer freed its parameters. Build a new block in each call,"
                            + " e.g. setModelFactory(() -> ResNetV1.builder()...build()).");
        }
        return block;
    }

    /**
     * The configuration supplier's configuration for one run, refused when it handed out the same
     * configuration or optimizer before: that optimizer would carry the first run's state (Adam's
     * moments, its update count) into the next, and the runs would not compare.
     */
    TrainingConfig newTrainingConfig() {
        TrainingConfig config = trainingConfig.get();
        if (config == null) {
            throw new IllegalArgumentException(
                    "The training configuration supplier returned null: return a new"
                            + " DefaultTrainingConfig from each call");
        }
        boolean newConfig = givenConfigs.add(config);
        boolean newOptimizer =
                config.getOptimizer() == null || givenConfigs.add(config.getOptimizer());
        if (!newConfig || !newOptimizer) {
            throw new IllegalArgumentException(
                    "The training configuration supplier returned the same "
                            + (newConfig ? "optimizer" : "configuration")
                            + " for a second run: its optimizer would carry the first run's state"
                            + " (Adam's moments, the update count) into the next, and the runs"
                            + " would not compare. Build a new configuration with a new optimizer"
                            + " in each call, e.g. setTrainingConfig(() -> new"
                            + " DefaultTrainingConfig(loss).optOptimizer(Optimizer.adam().build())).");
        }
        return config;
    }

    Supplier<Block> getModelFactory() {
        return modelFactory;
    }

    Supplier<TrainingConfig> getTrainingConfig() {
        return trainingConfig;
    }

    Dataset getTrainSet() {
        return trainSet;
    }

    Dataset getTestSet() {
        return testSet;
    }

    int getEpochs() {
        return epochs;
    }

    int getSeed() {
        return seed;
    }

    int getWarmupSteps() {
        return warmupSteps;
    }

    boolean isProgress() {
        return progress;
    }

    String getEngineName() {
        return engineName;
    }

    String getModelName() {
        return modelName;
    }

    LossScaling getLossScaling() {
        return lossScaling;
    }

    Shape getInputShape() {
        return inputShape;
    }

    /** Returns a new probe for a run on a device of an engine. */
    MemoryProbe newMemoryProbe(Device device, String engine) {
        return memoryProbes == null
                ? MemoryProbe.forDevice(device, engine)
                : memoryProbes.apply(device);
    }

    /**
     * Returns the policies this doctor compares, in order.
     *
     * @return the policies
     */
    public List<PrecisionPolicy> getPrecisions() {
        return precisions;
    }

    private DeviceCapabilities capabilities(Device device) {
        Engine engine = engineName == null ? Engine.getInstance() : Engine.getEngine(engineName);
        try (NDManager manager = engine.newBaseManager()) {
            return AmpBackends.forManager(manager).capabilities(device);
        } catch (AmpException e) {
            return null;
        }
    }

    /** Configures an {@link AmpDoctor}. */
    public static final class Builder {

        private Supplier<Block> modelFactory;
        private Supplier<TrainingConfig> trainingConfig;
        private Dataset trainSet;
        private Dataset testSet;
        private int epochs = 1;
        private List<PrecisionPolicy> precisions = parseAll(DEFAULT_PRECISIONS);
        private Checkpointing checkpointing = Checkpointing.none();
        private int seed = 42;
        private int warmupSteps = DEFAULT_WARMUP_STEPS;
        private boolean progress = true;
        private String engineName;
        private String modelName = "amp-doctor";
        private LossScaling lossScaling;
        private Shape inputShape;
        private Function<Device, MemoryProbe> memoryProbes;
        private boolean platformCheck = true;
        private PlatformReport platformReport;

        Builder() {}

        /**
         * Sets what builds the model: called once per run, so each run starts from a new block
         * (initialized from the same seed).
         *
         * @param modelFactory returns a new, uninitialized block each call
         * @return this builder
         */
        public Builder setModelFactory(Supplier<Block> modelFactory) {
            this.modelFactory = modelFactory;
            return this;
        }

        /**
         * Sets what builds the plain training configuration (loss, optimizer, initializers,
         * devices, listeners): called once per run, so optimizer state never carries over. Give the
         * configuration as for plain DJL: the doctor adds mixed precision itself.
         *
         * @param trainingConfig returns a new configuration each call
         * @return this builder
         */
        public Builder setTrainingConfig(Supplier<TrainingConfig> trainingConfig) {
            this.trainingConfig = trainingConfig;
            return this;
        }

        /**
         * Sets the data: the training set, shuffled the same way in every run, and the test set the
         * accuracy is measured on.
         *
         * @param train the training set
         * @param test the test set, or null to skip the accuracy
         * @return this builder
         */
        public Builder setDataset(Dataset train, Dataset test) {
            this.trainSet = train;
            this.testSet = test;
            return this;
        }

        /**
         * Sets the number of epochs of each run (default 1).
         *
         * @param epochs at least 1
         * @return this builder
         */
        public Builder optEpochs(int epochs) {
            this.epochs = epochs;
            return this;
        }

        /**
         * Sets the precision policies to compare, in order (default {@code float32}, {@code auto}).
         * {@code float32} (alias {@code fp32}) runs through plain DJL; any other policy string
         * ({@code auto}, {@code mixed_bfloat16} or {@code bf16}, {@code mixed_float16} or {@code
         * fp16}, with overrides as {@link PrecisionPolicy#parse} reads them) runs through djl-amp.
         * The first {@code float32} run is the baseline of the speedup.
         *
         * @param policies one or more policy strings, no two alike
         * @return this builder
         * @throws IllegalArgumentException when a policy string is not valid
         */
        public Builder optPrecisions(String... policies) {
            this.precisions = parseAll(List.of(policies));
            return this;
        }

        /**
         * Compares each djl-amp run with the same run under activation checkpointing: one more run
         * per policy other than {@code float32}, labelled with the setting, its step memory and
         * throughput beside the run without ({@code AmpOptions.Builder#checkpointing}).
         *
         * @param setting e.g. {@link Checkpointing#stages()}; {@link Checkpointing#none()} (the
         *     default) for no such runs
         * @return this builder
         */
        public Builder optCheckpointing(Checkpointing setting) {
            this.checkpointing =
                    Objects.requireNonNull(setting, "optCheckpointing: use Checkpointing.none()");
            return this;
        }

        /**
         * Sets the seed of the engine's and DJL's random generators, set again before each run
         * (default 42), so every run starts from the same weights and sees the same batches.
         *
         * @param seed the seed
         * @return this builder
         */
        public Builder optSeed(int seed) {
            this.seed = seed;
            return this;
        }

        /**
         * Sets how many first steps of each run are left out of its throughput (default {@value
         * #DEFAULT_WARMUP_STEPS}); a run with no more steps than that is measured over all its
         * steps.
         *
         * @param warmupSteps 0 or more
         * @return this builder
         */
        public Builder optWarmupSteps(int warmupSteps) {
            this.warmupSteps = warmupSteps;
            return this;
        }

        /**
         * Sets whether to print a line per run and DJL's progress bar with images per second to
         * standard output (default true).
         *
         * @param progress false to stay silent
         * @return this builder
         */
        public Builder optProgress(boolean progress) {
            this.progress = progress;
            return this;
        }

        /**
         * Sets the DJL engine (default: DJL's default engine).
         *
         * @param engineName the engine name, e.g. {@code PyTorch}
         * @return this builder
         */
        public Builder optEngine(String engineName) {
            this.engineName = engineName;
            return this;
        }

        /**
         * Sets the name of the models the runs create (default {@code amp-doctor}).
         *
         * @param modelName the name
         * @return this builder
         */
        public Builder optModelName(String modelName) {
            this.modelName = modelName;
            return this;
        }

        /**
         * Sets the loss scaling of the mixed precision runs (default: the precision's own, dynamic
         * for fp16 and none for bf16).
         *
         * @param lossScaling the loss scaling, or null for the default
         * @return this builder
         */
        public Builder optLossScaling(LossScaling lossScaling) {
            this.lossScaling = lossScaling;
            return this;
        }

        /**
         * Sets the shape the model is initialized with, batch dimension first (default: the shape
         * of the first test batch, else of the first training batch).
         *
         * @param inputShape the input shape
         * @return this builder
         */
        public Builder optInputShape(Shape inputShape) {
            this.inputShape = inputShape;
            return this;
        }

        /**
         * Sets what measures the memory of each run: called once per run with the training device,
         * it returns a new probe (default: {@link MemoryProbe#forDevice(Device, String)}, the
         * process's resident set on a Linux CPU, the device memory on a CUDA GPU). The doctor calls
         * the probe's {@link MemoryProbe#release()} before each run and before each step measured
         * for its memory.
         *
         * @param memoryProbes returns a new probe for a device, or null for the default
         * @return this builder
         */
        public Builder optMemoryProbe(Function<Device, MemoryProbe> memoryProbes) {
            this.memoryProbes = memoryProbes;
            return this;
        }

        /**
         * Sets whether the doctor runs the {@link PlatformCheck} before its first run (default
         * true; once per JVM, {@link PlatformCheck#cached()}, for DJL's default engine).
         *
         * @param platformCheck false to skip it (the report then has no platform line)
         * @return this builder
         */
        public Builder optPlatformCheck(boolean platformCheck) {
            this.platformCheck = platformCheck;
            return this;
        }

        /**
         * Gives the doctor a platform check's report the caller already has, to include in its
         * report instead of running the check (and printing it) itself.
         *
         * @param platformReport the report, or null to run the check as {@link
         *     #optPlatformCheck(boolean)} says
         * @return this builder
         */
        public Builder optPlatformReport(PlatformReport platformReport) {
            this.platformReport = platformReport;
            return this;
        }

        /**
         * Checks the settings and builds the doctor.
         *
         * @return the doctor
         * @throws IllegalArgumentException naming the setting that is missing or wrong
         * @throws IOException if the input shape has to be read from a dataset and that fails
         * @throws TranslateException if the dataset's pipeline fails while reading that shape
         */
        public AmpDoctor build() throws IOException, TranslateException {
            require(
                    modelFactory != null,
                    "setModelFactory(...) is missing: the doctor needs to"
                            + " build a fresh model for each run");
            require(
                    trainingConfig != null,
                    "setTrainingConfig(...) is missing: give the plain DJL"
                            + " training configuration (loss, optimizer); the doctor adds AMP itself");
            require(
                    trainSet != null,
                    "setDataset(train, test) is missing: the doctor trains on"
                            + " the training set");
            require(epochs >= 1, "optEpochs(" + epochs + "): train at least 1 epoch");
            require(warmupSteps >= 0, "optWarmupSteps(" + warmupSteps + "): must be 0 or more");
            require(!precisions.isEmpty(), "optPrecisions(): give at least one policy");
            Set<PrecisionPolicy> seen = new HashSet<>();
            for (PrecisionPolicy policy : precisions) {
                require(seen.add(policy), "optPrecisions(...) lists " + policy + " twice");
            }
            Shape shape = inputShape;
            if (shape == null) {
                shape = firstBatchShape(testSet != null ? testSet : trainSet);
            }
            return new AmpDoctor(this, shape);
        }

        private Shape firstBatchShape(Dataset dataset) throws IOException, TranslateException {
            Engine engine =
                    engineName == null ? Engine.getInstance() : Engine.getEngine(engineName);
            try (NDManager manager = engine.newBaseManager()) {
                Iterator<Batch> batches = dataset.getData(manager).iterator();
                if (!batches.hasNext()) {
                    throw new IllegalArgumentException(
                            "The dataset is empty: the doctor needs at least one batch");
                }
                try (Batch batch = batches.next()) {
                    return batch.getData().head().getShape();
                }
            }
        }

        private static List<PrecisionPolicy> parseAll(List<String> policies) {
            List<PrecisionPolicy> parsed = new ArrayList<>();
            for (String policy : policies) {
                parsed.add(PrecisionPolicy.parse(Objects.requireNonNull(policy, "policy")));
            }
            return parsed;
        }

        private static void require(boolean condition, String message) {
            if (!condition) {
                throw new IllegalArgumentException(message);
            }
        }
    }
}
