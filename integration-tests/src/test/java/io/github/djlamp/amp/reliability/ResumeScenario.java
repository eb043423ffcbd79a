package io.github.djlamp.amp.reliability;

import ai.djl.MalformedModelException;
import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import java.io.IOException;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Child-JVM program for {@link FreshJvmResumeTest}: trains steps [from, to) of a fixed schedule,
 * loading the model from {@code dir} first when {@code from > 0}, and saves it there at the end.
 * Prints the scaler state.
 */
public final class ResumeScenario {

    /** Steps whose batch holds an Inf, so the scale backs off during the run. */
    static final int[] OVERFLOW_STEPS = {7, 23};

    private ResumeScenario() {}

    static Block block() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(16).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    /**
     * Runs the scenario.
     *
     * @param args dir, from, to, and the {@link FusedOptimizer} choice (AUTO when left out)
     * @throws IOException if the model cannot be saved or loaded
     * @throws MalformedModelException if the saved model cannot be read
     */
    public static void main(String[] args) throws IOException, MalformedModelException {
        Path dir = Paths.get(args[0]);
        int from = Integer.parseInt(args[1]);
        int to = Integer.parseInt(args[2]);
        FusedOptimizer fused =
                args.length > 3 ? FusedOptimizer.valueOf(args[3]) : FusedOptimizer.AUTO;
        Engine.getInstance().setRandomSeed(1234);
        try (Model model = Model.newInstance("resume", "PyTorch")) {
            model.setBlock(Amp.wrap(block(), "mixed_float16"));
            if (from > 0) {
                model.load(dir, "resume");
            }
            // not DJL's L2 loss: its mul(0.5) leaves backward a Java buffer that a garbage
            // collection may free first (README, "DJL defects djl-amp cannot fix"), which made
            // this scenario overflow in one JVM and not in the other now and then
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.l1Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.05f))
                                            .build());
            AmpOptions options =
                    AmpOptions.builder()
                            .lossScaling(LossScaling.dynamicBuilder().growthInterval(5).build())
                            .fusedOptimizer(fused)
                            .build();
            try (Trainer trainer =
                    model.newTrainer(Amp.configure(config, model.getBlock(), options))) {
                trainer.initialize(new Shape(8, 5));
                for (int step = from; step < to; step++) {
                    NDManager m = trainer.getManager().newSubManager();
                    // the data of a step depends on the step only
                    NDArray x = m.arange(40f).reshape(8, 5).mul(0.01f * (step % 9 + 1));
                    for (int overflow : OVERFLOW_STEPS) {
                        if (step == overflow) {
                            x = x.mul(Float.POSITIVE_INFINITY);
                        }
                    }
                    NDArray y = m.ones(new Shape(8, 3)).mul(step % 3);
                    Batch batch = new Batch(m, new NDList(x), new NDList(y), 8, null, null, 0, 1);
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                    batch.close();
                }
                // read before the trainer closes, as a user logging the final state would
                System.out.println("STATE " + AmpSession.of(trainer).getScaler().state());
            }
            model.save(dir, "resume");
        }
    }
}
