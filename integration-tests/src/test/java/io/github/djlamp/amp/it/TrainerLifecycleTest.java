package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import org.junit.jupiter.api.Test;

/**
 * What happens around the steps: the end of an epoch inside an accumulation window, a trainer
 * closed inside one, a fixed scale that overflows every step, why "auto" chose what it chose, and
 * two trainers from one configuration.
 */
class TrainerLifecycleTest {

    private static AmpOptions accumulate(int batches) {
        return AmpOptions.builder().accumulationSteps(batches).build();
    }

    @Test
    void aPartialAccumulationWindowEndsWithTheEpoch() throws Exception {
        Engine.getInstance().setRandomSeed(12);
        try (Model model = Model.newInstance("partial-window", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(
                                            RealProgramsRig.sgd(0.1f), block, accumulate(3)));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                EasyTrain.fit(trainer, 1, RealProgramsRig.data(data, 4), null);
                assertEquals(
                        2,
                        AmpSession.of(trainer).getScaler().getSteps(),
                        "one full window of 3 batches, then the last batch's window");
                assertEquals(
                        0f,
                        RealProgramsRig.largestGradient(block, data),
                        "nothing left to add into the next epoch's first step");
            }
        }
    }

    @Test
    void aTrainerClosedInsideAWindowLeavesNoGradients() {
        Engine.getInstance().setRandomSeed(13);
        try (Model model = Model.newInstance("closed-window", "PyTorch");
                NDManager data = NDManager.newBaseManager()) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            try (Trainer trainer =
                    model.newTrainer(
                            Amp.configure(RealProgramsRig.sgd(0.1f), block, accumulate(3)))) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                task.trainStep(trainer, 0);
                task.trainStep(trainer, 1);
                assertTrue(RealProgramsRig.largestGradient(block, data) > 0);
            }
            assertEquals(
                    0f,
                    RealProgramsRig.largestGradient(block, data),
                    "the next trainer of this model starts from clean gradients");
        }
    }

    @Test
    void aFixedScaleThatOverflowsEveryStepStopsTraining() {
        Engine.getInstance().setRandomSeed(14);
        try (Model model = Model.newInstance("fixed-overflow", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "mixed_float16");
            model.setBlock(block);
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(
                                            RealProgramsRig.sgd(0.1f),
                                            block,
                                            // fused steps (the GPU default) stop at a host read
                                            AmpOptions.builder()
                                                    .lossScaling(LossScaling.fixed(0x1p40f))
                                                    .hostSyncInterval(1)
                                                    .build()));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                LossScaler scaler = AmpSession.of(trainer).getScaler();
                AmpException e =
                        assertThrows(
                                AmpException.class,
                                () -> {
                                    for (int i = 0;
                                            i < 3 * AmpSession.FIXED_SCALE_OVERFLOW_LIMIT;
                                            i++) {
                                        task.trainStep(trainer, i);
                                    }
                                });
                assertTrue(e.getMessage().contains("fixed loss scale"), e.getMessage());
                assertTrue(e.getMessage().contains("smaller"), e.getMessage());
                assertEquals(AmpSession.FIXED_SCALE_OVERFLOW_LIMIT, scaler.getSkippedSteps());
                assertEquals(AmpSession.FIXED_SCALE_OVERFLOW_LIMIT, scaler.getSteps());
            }
        }
    }

    @Test
    void autoSaysWhyItChoseItsPrecision() {
        try (Model model = Model.newInstance("auto", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "auto");
            model.setBlock(block);
            try (Trainer trainer =
                    model.newTrainer(Amp.configure(RealProgramsRig.sgd(0.1f), block))) {
                String reason =
                        AmpBackends.forManager(trainer.getManager())
                                .capabilities(trainer.getDevices()[0])
                                .getReason();
                String choice = AmpSession.of(trainer).getPolicyChoice();
                assertTrue(choice.contains(reason), choice);
                assertTrue(choice.contains("auto"), choice);
                assertTrue(choice.contains(Device.cpu().toString()) || !reason.isEmpty());
            }
        }
    }

    @Test
    void aSecondOpenTrainerFromOneConfigurationIsRefused() {
        try (Model model = Model.newInstance("two-trainers", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            AmpTrainingConfig config = Amp.configure(RealProgramsRig.sgd(0.1f), block);
            try (Trainer first = model.newTrainer(config)) {
                first.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                IllegalStateException e =
                        assertThrows(IllegalStateException.class, () -> model.newTrainer(config));
                assertTrue(e.getMessage().contains("Amp.configure"), e.getMessage());
                assertTrue(e.getMessage().contains("close the first"), e.getMessage());
            }
            try (Trainer next = model.newTrainer(config)) {
                assertEquals(0, AmpSession.of(next).getScaler().getSteps(), "after close: fine");
            }
        }
    }
}
