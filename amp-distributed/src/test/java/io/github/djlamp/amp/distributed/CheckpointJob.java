package io.github.djlamp.amp.distributed;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.listener.SaveModelTrainingListener;
import ai.djl.training.listener.TrainingListenerAdapter;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.scale.ScalerState;
import io.github.djlamp.amp.train.AmpSession;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The program the checkpoint tests launch on every rank: fp16 with dynamic scaling (an Inf on rank
 * 1 skips one step an epoch), SGD with momentum, checkpoints through DJL's {@code
 * SaveModelTrainingListener} (weights, scaler state and the optimizer's state; a resume loads rank
 * 0's optimizer state into every rank).
 *
 * <p>Arguments: {@code OUT CHECKPOINTS MODE}. {@code save}: two epochs with a checkpoint after
 * each; rank 0 is killed (SIGKILL) in the middle of writing the second. {@code straight}: the same
 * two epochs, uninterrupted; every rank writes its weights and scaler state at the end ({@code
 * OUT/straight-end-rank-R.txt}). {@code resume}: rank 0 loads the newest checkpoint, rank 1 loads
 * nothing and holds another scaler state; the sampler continues at the checkpoint's epoch; every
 * rank writes its state once the trainer is initialized ({@code OUT/resume-start-rank-R.txt}) and
 * after the second epoch ({@code OUT/resume-end-rank-R.txt}). {@code resume-all}: the same, every
 * rank loading the checkpoint ({@code OUT/resume-all-...}).
 */
public final class CheckpointJob {

    static final String NAME = "ckpt";
    static final int STEPS_PER_EPOCH = 4;
    static final int GLOBAL_BATCH = 8;
    static final LossScaling SCALING =
            LossScaling.dynamicBuilder().initScale(1024f).growthInterval(3).hysteresis(2).build();

    private CheckpointJob() {}

    /**
     * Runs one phase on the world the launcher started.
     *
     * @param args see the class comment
     * @throws Exception when training fails
     */
    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        Path checkpoints = Path.of(args[1]);
        String mode = args[2];
        boolean resume = mode.startsWith("resume");
        try (World world = World.init()) {
            Engine.getInstance().setRandomSeed(1000 + world.getRank());
            AtomicInteger step = new AtomicInteger();
            KillWhileSaving block = new KillWhileSaving(mlp());
            try (Model model = Model.newInstance(NAME);
                    NDManager data = NDManager.newBaseManager()) {
                model.setBlock(Amp.wrap(block, "fp16"));
                if (resume && (world.isRoot() || mode.equals("resume-all"))) {
                    model.load(checkpoints, NAME);
                } else if (resume) {
                    model.setProperty(
                            AmpSession.SCALER_STATE_PROPERTY,
                            new ScalerState(8f, 1, 1, 40, 3).withOrigin(SCALING).toString());
                }
                SaveModelTrainingListener save =
                        new SaveModelTrainingListener(checkpoints.toString(), NAME, 1);
                save.setSaveModelCallback(
                        trainer -> {
                            if (mode.equals("save")
                                    && "2".equals(trainer.getModel().getProperty("Epoch"))) {
                                block.armed = true;
                            }
                        });
                int injectAt = world.getRank() == 1 ? 2 : -1;
                DefaultTrainingConfig config =
                        new DefaultTrainingConfig(
                                        new TrainingJob.FaultyLoss(
                                                Loss.softmaxCrossEntropyLoss(), step, injectAt))
                                .optOptimizer(
                                        // momentum: a resume needs the optimizer's state too
                                        Optimizer.sgd()
                                                .setLearningRateTracker(Tracker.fixed(0.1f))
                                                .optMomentum(0.9f)
                                                .build())
                                .addTrainingListeners(
                                        new TrainingListenerAdapter() {
                                            @Override
                                            public void onTrainingBatch(
                                                    Trainer trainer, BatchData batchData) {
                                                // the Inf comes at the same step of every epoch
                                                step.set((step.get() + 1) % STEPS_PER_EPOCH);
                                            }
                                        });
                config.addTrainingListeners(save);
                AmpOptions options = AmpOptions.builder().lossScaling(SCALING).build();
                DistributedSampler sampler = new DistributedSampler(GLOBAL_BATCH, true, 7, world);
                int done = 0;
                if (resume) {
                    // the epochs the checkpoint holds, known where it was loaded: rank 0
                    done =
                            Integer.parseInt(
                                    world.broadcast(
                                            String.valueOf(model.getProperty("Epoch")),
                                            "epochs done"));
                    sampler.setEpoch(done);
                }
                ArrayDataset dataset =
                        TrainingJob.dataset(data, STEPS_PER_EPOCH * GLOBAL_BATCH)
                                .setSampling(sampler)
                                .build();
                try (Trainer trainer =
                        model.newTrainer(
                                DataParallel.configure(
                                        Amp.configure(config, model.getBlock(), options), world))) {
                    trainer.initialize(
                            new Shape(GLOBAL_BATCH / world.getSize(), TrainingJob.FEATURES));
                    if (resume) {
                        DataParallel.loadOptimizerState(
                                trainer,
                                world,
                                AtomicCheckpoint.optimizerStateFile(checkpoints, NAME, done));
                        write(
                                out.resolve(mode + "-start-rank-" + world.getRank() + ".txt"),
                                trainer);
                    }
                    EasyTrain.fit(trainer, resume ? 1 : 2, dataset, null);
                    write(out.resolve(mode + "-end-rank-" + world.getRank() + ".txt"), trainer);
                }
            }
        }
    }

    static SequentialBlock mlp() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(16).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(TrainingJob.CLASSES).build());
    }

    /** A rank's state: its loss scaler's and its weights. */
    static final class State {
        final ScalerState scaler;
        final List<float[]> weights;

        State(ScalerState scaler, List<float[]> weights) {
            this.scaler = scaler;
            this.weights = weights;
        }

        static State read(Path file) throws IOException {
            String[] lines = Files.readString(file, StandardCharsets.UTF_8).strip().split("\n");
            List<float[]> weights = new ArrayList<>();
            for (int i = 1; i < lines.length; i++) {
                String[] parts = lines[i].trim().split(" ");
                float[] values = new float[parts.length];
                for (int j = 0; j < parts.length; j++) {
                    values[j] = Float.intBitsToFloat(Integer.parseUnsignedInt(parts[j], 16));
                }
                weights.add(values);
            }
            return new State(ScalerState.parse(lines[0]), weights);
        }

        /** What {@code Model.load} reads from the newest checkpoint in a directory. */
        static State ofCheckpoint(Path directory) throws Exception {
            try (Model model = Model.newInstance(NAME)) {
                model.setBlock(mlp());
                model.load(directory, NAME);
                return new State(
                        ScalerState.parse(model.getProperty(AmpSession.SCALER_STATE_PROPERTY)),
                        weights(model.getBlock()));
            }
        }
    }

    private static void write(Path file, Trainer trainer) throws IOException {
        LossScaler scaler = AmpSession.of(trainer).getScaler();
        if (Boolean.getBoolean(FusedOptimizer.PROPERTY) && !scaler.isStateOnDevice()) {
            throw new IllegalStateException("fused steps asked for, not taken");
        }
        StringBuilder text = new StringBuilder();
        text.append(scaler.state());
        for (float[] values : weights(trainer.getModel().getBlock())) {
            text.append('\n');
            for (float value : values) {
                text.append(Integer.toHexString(Float.floatToRawIntBits(value))).append(' ');
            }
        }
        Files.writeString(file, text.append('\n').toString(), StandardCharsets.UTF_8);
    }

    private static List<float[]> weights(Block block) {
        List<float[]> values = new ArrayList<>();
        for (Pair<String, Parameter> pair : block.getParameters()) {
            values.add(pair.getValue().getArray().toFloatArray());
        }
        return values;
    }

    /** The MLP, whose parameter writing, once armed, stops halfway and kills the process. */
    static final class KillWhileSaving extends SequentialBlock {
        volatile boolean armed;

        KillWhileSaving(SequentialBlock inner) {
            addAll(inner.getChildren().values());
        }

        @Override
        public void saveParameters(DataOutputStream os) throws IOException {
            if (!armed) {
                super.saveParameters(os);
                return;
            }
            ByteArrayOutputStream all = new ByteArrayOutputStream();
            super.saveParameters(new DataOutputStream(all));
            os.write(all.toByteArray(), 0, all.size() / 2);
            os.flush();
            System.err.println("CheckpointJob: rank 0 dies while writing checkpoint 2");
            TrainingJob.fail("kill");
        }
    }
}
