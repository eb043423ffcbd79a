package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.evaluator.Accuracy;
import ai.djl.training.listener.TrainingListener;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.scale.LossScaleCollapsedException;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import org.junit.jupiter.api.Test;

/**
 * A step djl-amp skipped does not read as divergence, and true divergence is named as such: a NaN
 * loss is "check the data", with or without gradient accumulation, and the counters agree.
 */
class SkipIsNotDivergenceTest {

    @Test
    void anEpochWhoseStepsAllOverflowedReportsItsFiniteLoss() throws Exception {
        Engine.getInstance().setRandomSeed(6);
        try (Model model = Model.newInstance("warm-up", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "mixed_float16");
            model.setBlock(block);
            // fp16's warm-up: a scale so large that every step's scaled gradients overflow
            LossScaling huge = LossScaling.dynamicBuilder().initScale(0x1p24f).build();
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(
                                            RealProgramsRig.sgd(0.1f)
                                                    .addEvaluator(new Accuracy())
                                                    .addTrainingListeners(
                                                            TrainingListener.Defaults.logging()),
                                            model.getBlock(),
                                            huge));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                EasyTrain.fit(trainer, 1, RealProgramsRig.data(data, 2), null);

                LossScaler scaler = AmpSession.of(trainer).getScaler();
                assertEquals(2, scaler.getSkippedSteps(), "both steps overflowed");
                Float trainLoss = trainer.getTrainingResult().getTrainLoss();
                assertTrue(
                        trainLoss != null && Float.isFinite(trainLoss) && trainLoss > 0,
                        "a step skipped for overflowing gradients keeps its finite loss in the"
                                + " epoch's mean: "
                                + trainLoss);
            }
        }
    }

    @Test
    void oneNanBatchWithDjlsLoggingListenersIsSkippedNotDivergence() throws Exception {
        Engine.getInstance().setRandomSeed(6);
        try (Model model = Model.newInstance("readme", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "mixed_float16");
            model.setBlock(block);
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(
                                            RealProgramsRig.sgd(0.1f)
                                                    .addEvaluator(new Accuracy())
                                                    .addTrainingListeners(
                                                            TrainingListener.Defaults.logging()),
                                            model.getBlock()));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                EasyTrain.fit(trainer, 1, RealProgramsRig.data(data, 4, 1), null);

                LossScaler scaler = AmpSession.of(trainer).getScaler();
                assertEquals(4, scaler.getSteps());
                assertEquals(1, scaler.getSkippedSteps(), "the NaN batch was skipped");
                assertEquals(LossScaling.DEFAULT_INIT_SCALE / 2, scaler.getScale());
                Float trainLoss = trainer.getTrainingResult().getTrainLoss();
                assertTrue(
                        trainLoss != null && Float.isFinite(trainLoss),
                        "the epoch's loss DJL reports leaves the skipped batch out: " + trainLoss);
            }
        }
    }

    @Test
    void aNanLossInAnEarlyMicroBatchIsNamedAsDivergence() throws Exception {
        nanLossInAnEarlyMicroBatchIsNamedAsDivergence(false);
    }

    /**
     * Fused steps: the scaler state lives on the device and the collapse is found at the next host
     * read (the epoch's end here), with the same diagnosis and counters that agree.
     */
    @Test
    void aNanLossInAnEarlyMicroBatchIsNamedAsDivergenceWithFusedSteps() throws Exception {
        nanLossInAnEarlyMicroBatchIsNamedAsDivergence(true);
    }

    private void nanLossInAnEarlyMicroBatchIsNamedAsDivergence(boolean fused) throws Exception {
        Engine.getInstance().setRandomSeed(7);
        try (Model model = Model.newInstance("accumulated-nan", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            AmpOptions options =
                    AmpOptions.builder()
                            .lossScaling(LossScaling.dynamicBuilder().initScale(16f).build())
                            .accumulationSteps(2)
                            .fusedOptimizer(fused ? FusedOptimizer.ON : FusedOptimizer.OFF)
                            .build();
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(
                                            RealProgramsRig.sgd(0.1f)
                                                    .addTrainingListeners(
                                                            TrainingListener.Defaults.logging()),
                                            block,
                                            options));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                // the first micro-batch of every window holds a NaN; its loss is released before
                // the window's check
                LossScaleCollapsedException e =
                        assertThrows(
                                LossScaleCollapsedException.class,
                                () ->
                                        EasyTrain.fit(
                                                trainer,
                                                4,
                                                RealProgramsRig.data(data, 4, 0, 2),
                                                null));
                assertTrue(e.isLossNonFinite(), e.getMessage());
                assertTrue(e.getMessage().contains("check the data"), e.getMessage());
                LossScaler scaler = AmpSession.of(trainer).getScaler();
                assertEquals(fused, scaler.isStateOnDevice());
                assertEquals(
                        scaler.getSteps(),
                        scaler.getSkippedSteps(),
                        "every step was skipped, the collapsing one included, and counted so");
                if (fused) {
                    // read at the end of the epoch of the collapse: its other step ran too
                    assertEquals(6, scaler.getSteps(), "16, 8, 4, 2, 1, the collapse, one more");
                } else {
                    assertEquals(5, scaler.getSteps(), "16, 8, 4, 2, 1, then the collapse");
                }
            }
        }
    }
}
