package io.github.djlamp.amp.distributed;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingConfig;
import ai.djl.training.TrainingResult;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.evaluator.Accuracy;
import ai.djl.training.initializer.ConstantInitializer;
import ai.djl.training.listener.EvaluatorTrainingListener;
import ai.djl.training.listener.TrainingListenerAdapter;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.scale.ScalerState;
import io.github.djlamp.amp.train.AmpSession;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The program the MPI tests launch on every rank (and run in-process as the one-process reference):
 * a small MLP trained with {@code EasyTrain.fit} for a few steps in fp32, bf16 and fp16 with
 * dynamic scaling, each rank starting from its own random initialization. Writes, per precision,
 * the loss scale, the step counts and every weight's bits to {@code OUT/PRECISION-rank-R.txt}.
 *
 * <p>Arguments: {@code OUT STEPS GLOBAL_BATCH PRECISIONS [fault=RANK:STEP:KIND] [staging=host]
 * [deadline=SECONDS]}, {@code staging=host} making CPU gradients take the host staging CUDA
 * gradients take, {@code deadline} setting {@code DataParallelOptions.collectiveTimeout}; KIND one
 * of {@code inf} (an Inf in that rank's loss, so its gradients, at that step), {@code kill}
 * (SIGKILL), {@code hang} (stops forever), {@code throw} (an exception out of the training loop)
 * or, with STEP 0, {@code hang-at-end} (stops forever after training, before closing its world).
 */
public final class TrainingJob {

    static final int FEATURES = 12;
    static final int CLASSES = 4;

    private TrainingJob() {}

    /**
     * Runs the job on the world the launcher started.
     *
     * @param args see the class comment
     * @throws Exception when training fails
     */
    /** The activation checkpointing of this job's runs (an option of the command line). */
    private static Checkpointing checkpointing = Checkpointing.none();

    /** The checkpointed segments the last run recomputed. */
    private static long recomputedSegments;

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        int steps = Integer.parseInt(args[1]);
        int globalBatch = Integer.parseInt(args[2]);
        String fault = null;
        boolean stageCpuBuckets = false;
        Duration deadline = null;
        for (int i = 4; i < args.length; i++) {
            if (args[i].startsWith("fault=")) {
                fault = args[i];
            } else if (args[i].equals("staging=host")) {
                stageCpuBuckets = true;
            } else if (args[i].startsWith("checkpointing=")) {
                checkpointing = Checkpointing.parse(args[i].substring("checkpointing=".length()));
            } else if (args[i].startsWith("deadline=")) {
                deadline = Duration.ofSeconds(Long.parseLong(args[i].substring(9)));
            } else {
                throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        try (World world = World.init()) {
            if (args[3].equals("bn-start")) {
                Files.writeString(
                        out.resolve("bn-start-rank-" + world.getRank() + ".txt"),
                        batchNormStart(world).toString(),
                        StandardCharsets.UTF_8);
                return;
            }
            for (String precision : args[3].split(",")) {
                Result result =
                        train(
                                world,
                                precision,
                                steps,
                                globalBatch,
                                fault,
                                stageCpuBuckets,
                                deadline);
                Files.writeString(
                        out.resolve(precision + "-rank-" + world.getRank() + ".txt"),
                        result.toString(),
                        StandardCharsets.UTF_8);
                Files.writeString(
                        out.resolve(precision + "-rank-" + world.getRank() + ".segments"),
                        Long.toString(recomputedSegments),
                        StandardCharsets.UTF_8);
            }
            if (("fault=" + world.getRank() + ":0:hang-at-end").equals(fault)) {
                fail("hang");
            }
        }
    }

    /** What a rank ends a run with. */
    static final class Result {
        final float scale;
        final long steps;
        final long skipped;
        final float epochLoss;
        final float epochAccuracy;
        final long stagedBuckets;
        final List<float[]> weights;

        Result(
                float scale,
                long steps,
                long skipped,
                float epochLoss,
                float epochAccuracy,
                long stagedBuckets,
                List<float[]> weights) {
            this.scale = scale;
            this.steps = steps;
            this.skipped = skipped;
            this.epochLoss = epochLoss;
            this.epochAccuracy = epochAccuracy;
            this.stagedBuckets = stagedBuckets;
            this.weights = weights;
        }

        static Result parse(String text) {
            String[] lines = text.strip().split("\n");
            List<float[]> weights = new ArrayList<>();
            for (int i = 6; i < lines.length; i++) {
                String[] parts = lines[i].trim().split(" ");
                float[] values = new float[parts.length];
                for (int j = 0; j < parts.length; j++) {
                    values[j] = Float.intBitsToFloat(Integer.parseUnsignedInt(parts[j], 16));
                }
                weights.add(values);
            }
            return new Result(
                    Float.parseFloat(lines[0]),
                    Long.parseLong(lines[1]),
                    Long.parseLong(lines[2]),
                    Float.parseFloat(lines[3]),
                    Float.parseFloat(lines[4]),
                    Long.parseLong(lines[5]),
                    weights);
        }

        @Override
        public String toString() {
            StringBuilder text = new StringBuilder();
            text.append(scale).append('\n').append(steps).append('\n').append(skipped);
            text.append('\n').append(epochLoss).append('\n').append(epochAccuracy);
            text.append('\n').append(stagedBuckets);
            for (float[] values : weights) {
                text.append('\n');
                for (float value : values) {
                    text.append(Integer.toHexString(Float.floatToRawIntBits(value))).append(' ');
                }
            }
            return text.append('\n').toString();
        }
    }

    static Result train(World world, String precision, int steps, int globalBatch, String fault)
            throws IOException, ai.djl.translate.TranslateException {
        return train(world, precision, steps, globalBatch, fault, false, null);
    }

    static Result train(
            World world,
            String requestedPrecision,
            int steps,
            int globalBatch,
            String fault,
            boolean stageCpuBuckets,
            Duration deadline)
            throws IOException, ai.djl.translate.TranslateException {
        // each rank initializes differently: the broadcast from rank 0 must make them agree
        Engine.getInstance().setRandomSeed(1000 + world.getRank());
        String precision = requestedPrecision;
        AtomicInteger step = new AtomicInteger();
        int faultRank = -1;
        int faultStep = -1;
        String faultKind = "";
        if (fault != null) {
            String[] parts = fault.substring(fault.indexOf('=') + 1).split(":");
            faultRank = Integer.parseInt(parts[0]);
            faultStep = Integer.parseInt(parts[1]);
            faultKind = parts[2];
        }
        boolean mine = faultRank == world.getRank();
        int injectAt = mine && faultKind.equals("inf") ? faultStep : -1;

        // a rank that differs on purpose: another width, an extra layer, another policy
        SequentialBlock mlp =
                new SequentialBlock()
                        .add(
                                Linear.builder()
                                        .setUnits(mine && faultKind.equals("width") ? 24 : 16)
                                        .build())
                        .add(Activation.reluBlock())
                        .add(Linear.builder().setUnits(CLASSES).build());
        if (mine && faultKind.equals("layer")) {
            mlp.add(Linear.builder().setUnits(CLASSES).build());
        }
        if (mine && faultKind.equals("policy")) {
            precision = precision.equals("bf16") ? "fp16" : "bf16";
        }
        try (Model model = Model.newInstance("dp-job");
                NDManager data = NDManager.newBaseManager()) {
            model.setBlock(Amp.wrap(mlp, precision));
            if (!world.isRoot()) {
                // as if this rank had resumed from another checkpoint: rank 0's state must win
                model.setProperty(
                        AmpSession.SCALER_STATE_PROPERTY,
                        new ScalerState(8f, 1, 0, 40, 3).toString());
            }
            ArrayDataset dataset =
                    dataset(data, (mine && faultKind.equals("data") ? 2 : 1) * steps * globalBatch)
                            .setSampling(new DistributedSampler(globalBatch, true, 7, world))
                            .build();
            Loss loss = new FaultyLoss(Loss.softmaxCrossEntropyLoss(), step, injectAt);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(loss)
                            .addEvaluator(new Accuracy())
                            .addTrainingListeners(new EvaluatorTrainingListener())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build());
            AmpOptions options =
                    AmpOptions.builder()
                            .checkpointing(checkpointing)
                            .lossScaling(
                                    precision.contains("16") && !precision.contains("b")
                                            ? LossScaling.dynamicBuilder()
                                                    .initScale(1024f)
                                                    .growthInterval(3)
                                                    .build()
                                            : null)
                            .build();
            int killAt = mine && !faultKind.equals("inf") ? faultStep : -1;
            String kind = faultKind;
            config.addTrainingListeners(
                    new TrainingListenerAdapter() {
                        @Override
                        public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                            if (step.incrementAndGet() == killAt) {
                                fail(kind);
                            }
                        }
                    });
            BucketedAllReduce reducer = new BucketedAllReduce(world, 1024, stageCpuBuckets);
            DataParallelOptions.Builder dpOptions =
                    DataParallelOptions.builder().gradientReducer(reducer);
            if (deadline != null) {
                dpOptions.collectiveTimeout(deadline);
            }
            TrainingConfig dp =
                    DataParallel.configure(
                            Amp.configure(config, model.getBlock(), options),
                            world,
                            dpOptions.build());
            try (Trainer trainer = model.newTrainer(dp)) {
                trainer.initialize(new Shape(globalBatch / world.getSize(), FEATURES));
                EasyTrain.fit(trainer, 1, dataset, null);
                LossScaler scaler = AmpSession.of(trainer).getScaler();
                if (Boolean.getBoolean(FusedOptimizer.PROPERTY)
                        && scaler.getConfig().isEnabled()
                        && !scaler.isStateOnDevice()) {
                    throw new IllegalStateException("fused steps asked for, not taken");
                }
                List<float[]> weights = new ArrayList<>();
                for (Pair<String, Parameter> pair : model.getBlock().getParameters()) {
                    weights.add(pair.getValue().getArray().toFloatArray());
                }
                TrainingResult result = trainer.getTrainingResult();
                recomputedSegments = AmpSession.of(trainer).getRecomputedSegments();
                return new Result(
                        scaler.getScale(),
                        scaler.getSteps(),
                        scaler.getSkippedSteps(),
                        result.getTrainLoss(),
                        result.getTrainEvaluation("Accuracy"),
                        reducer.getStagedBuckets(),
                        weights);
            }
        }
    }

    /**
     * Each rank initializes a BatchNorm network differently (weights by seed, running statistics by
     * constants that differ by rank); returns every parameter after {@code Trainer.initialize}.
     */
    static Result batchNormStart(World world) {
        Engine.getInstance().setRandomSeed(1000 + world.getRank());
        SequentialBlock block =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(8).build())
                        .add(BatchNorm.builder().build());
        block.setInitializer(
                new ConstantInitializer(1 + world.getRank()), Parameter.Type.RUNNING_MEAN);
        block.setInitializer(
                new ConstantInitializer(2 + world.getRank()), Parameter.Type.RUNNING_VAR);
        try (Model model = Model.newInstance("bn-start")) {
            model.setBlock(Amp.wrap(block, "fp32"));
            DefaultTrainingConfig config = new DefaultTrainingConfig(Loss.l2Loss());
            try (Trainer trainer =
                    model.newTrainer(
                            DataParallel.configure(
                                    Amp.configure(config, model.getBlock()), world))) {
                trainer.initialize(new Shape(4, FEATURES));
                List<float[]> values = new ArrayList<>();
                for (Pair<String, Parameter> pair : model.getBlock().getParameters()) {
                    values.add(pair.getValue().getArray().toFloatArray());
                }
                return new Result(0, 0, 0, 0, 0, 0, values);
            }
        }
    }

    static void fail(String kind) {
        System.err.println("TrainingJob: rank fault '" + kind + "' now");
        System.err.flush();
        if (kind.equals("throw")) {
            throw new IllegalStateException("TrainingJob: a bug on this rank");
        }
        if (kind.equals("kill")) {
            try {
                new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid()))
                        .start()
                        .waitFor();
            } catch (IOException | InterruptedException e) {
                Runtime.getRuntime().halt(137);
            }
        }
        while (true) {
            try {
                Thread.sleep(60_000);
            } catch (InterruptedException e) {
                // hang means hang
            }
        }
    }

    static ArrayDataset.Builder dataset(NDManager manager, int size) {
        Random random = new Random(42);
        float[] x = new float[size * FEATURES];
        float[] y = new float[size];
        for (int i = 0; i < size; i++) {
            int label = random.nextInt(CLASSES);
            y[i] = label;
            for (int j = 0; j < FEATURES; j++) {
                x[i * FEATURES + j] =
                        (float) random.nextGaussian() + (j % CLASSES == label ? 1 : 0);
            }
        }
        NDArray features = manager.create(x, new Shape(size, FEATURES));
        NDArray labels = manager.create(y, new Shape(size));
        return new ArrayDataset.Builder().setData(features).optLabels(labels);
    }

    /** The loss, times Inf at one step when asked to inject. */
    static final class FaultyLoss extends Loss {
        private final Loss inner;
        private final AtomicInteger step;
        private final int injectAt;

        FaultyLoss(Loss inner, AtomicInteger step, int injectAt) {
            super(inner.getName());
            this.inner = inner;
            this.step = step;
            this.injectAt = injectAt;
        }

        @Override
        public NDArray evaluate(NDList labels, NDList predictions) {
            NDArray value = inner.evaluate(labels, predictions);
            // step counts finished steps: the batch being trained is step + 1
            // backward reads the Inf: made by the engine (GcSafe), not by DJL's mul(Number)
            return step.get() + 1 == injectAt ? GcSafe.mul(value, Float.POSITIVE_INFINITY) : value;
        }
    }
}
