package io.github.djlamp.amp.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.it.GcSafe;
import io.github.djlamp.amp.scale.LossScaleCollapsedException;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import org.junit.jupiter.api.Test;

/** Overflow storms back the scale off as specified; real divergence stops training, named. */
class DivergenceTest {

    private static Model model(String policy) {
        Model model = Model.newInstance("storm", "PyTorch");
        model.setBlock(
                Amp.wrap(
                        new SequentialBlock()
                                .add(Linear.builder().setUnits(8).build())
                                .add(Activation.reluBlock())
                                .add(Linear.builder().setUnits(2).build()),
                        policy));
        return model;
    }

    private static DefaultTrainingConfig config() {
        return new DefaultTrainingConfig(GcSafe.l2Loss())
                .optOptimizer(Optimizer.sgd().setLearningRateTracker(Tracker.fixed(0.01f)).build());
    }

    /** One EasyTrain step; {@code poison} multiplies the input (NaN makes the loss NaN). */
    private static void step(Trainer trainer, float poison) {
        NDManager m = trainer.getManager().newSubManager();
        NDArray x = m.ones(new Shape(4, 3)).mul(poison);
        Batch batch =
                new Batch(
                        m,
                        new NDList(x),
                        new NDList(m.zeros(new Shape(4, 2))),
                        4,
                        null,
                        null,
                        0,
                        1);
        try {
            EasyTrain.trainBatch(trainer, batch);
            trainer.step();
        } finally {
            batch.close();
        }
    }

    @Test
    void anOverflowStormHalvesTheScaleOncePerStep() {
        try (Model model = model("mixed_float16");
                Trainer trainer = model.newTrainer(Amp.configure(config(), model.getBlock()))) {
            trainer.initialize(new Shape(4, 3));
            AmpSession amp = AmpSession.of(trainer);
            step(trainer, 1f); // may itself overflow at 2^16, as GradScaler's first steps do
            float start = amp.getScaler().getScale();
            long skippedBefore = amp.getScaler().getSkippedSteps();
            for (int i = 1; i <= 6; i++) {
                step(trainer, Float.POSITIVE_INFINITY);
                assertEquals(start / (1 << i), amp.getScaler().getScale(), "after overflow " + i);
                assertEquals(0, amp.getScaler().getGrowthTracker());
            }
            assertEquals(skippedBefore + 6, amp.getScaler().getSkippedSteps());
        }
    }

    @Test
    void aLossThatIsNanInFp32TooIsReportedAsDivergence() {
        LossScaling scaling = LossScaling.dynamicBuilder().minScale(1f).build();
        try (Model model = model("mixed_float16");
                Trainer trainer =
                        model.newTrainer(
                                Amp.configure(
                                        config(),
                                        model.getBlock(),
                                        // fused steps (the GPU default) find it at a host read
                                        AmpOptions.builder()
                                                .lossScaling(scaling)
                                                .hostSyncInterval(1)
                                                .build()))) {
            trainer.initialize(new Shape(4, 3));
            int steps = 0;
            LossScaleCollapsedException e = null;
            while (e == null && steps < 100) {
                try {
                    step(trainer, Float.NaN);
                    steps++;
                } catch (LossScaleCollapsedException thrown) {
                    e = thrown;
                }
            }
            assertTrue(e != null, "training went on for 100 NaN steps");
            assertEquals(16, steps, "2^16 halves to the minimum 1 in 16 skipped steps");
            assertTrue(e.isLossNonFinite());
            assertTrue(e.getMessage().startsWith("Training diverged"), e.getMessage());
            assertFalse(e.getNonFiniteParameters().isEmpty(), e.getMessage());
        }
    }
}
