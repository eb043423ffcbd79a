package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.LossScalingOptimizer;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * DJL's Nag meets a gap of DJL's PyTorch engine (no {@code nagUpdate}): {@code FusedOptimizer.AUTO}
 * fuses it on any single device, the CPU included; on DJL's own per-parameter update ({@code OFF})
 * the refusal says so and names the fused step that has one.
 */
class NagWithoutFusedStepTest {

    private static DefaultTrainingConfig nag() {
        return new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                .optOptimizer(
                        Optimizer.nag()
                                .setLearningRateTracker(Tracker.fixed(0.1f))
                                .setMomentum(0.9f)
                                .build());
    }

    @Test
    void plainDjlHasNoNagUpdateInThePyTorchEngine() {
        Engine.getInstance().setRandomSeed(8);
        try (Model model = Model.newInstance("nag-plain", "PyTorch")) {
            model.setBlock(new RealProgramsRig.Mlp().block);
            try (Trainer trainer = model.newTrainer(nag());
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                UnsupportedOperationException e =
                        assertThrows(
                                UnsupportedOperationException.class,
                                () ->
                                        EasyTrain.fit(
                                                trainer, 1, RealProgramsRig.data(data, 1), null));
                assertTrue(e.getMessage().contains("Not implemented"), e.getMessage());
            }
        }
    }

    /** Trains three batches of Nag with the setting; returns the weights after. */
    private static List<float[]> trainNag(FusedOptimizer setting) throws Exception {
        Engine.getInstance().setRandomSeed(8);
        try (Model model = Model.newInstance("nag-" + setting, "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            AmpOptions options = AmpOptions.builder().fusedOptimizer(setting).build();
            AmpTrainingConfig config = Amp.configure(nag(), block, options);
            try (Trainer trainer = model.newTrainer(config);
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                List<float[]> before = RealProgramsRig.values(block);
                EasyTrain.fit(trainer, 1, RealProgramsRig.data(data, 3), null);
                LossScalingOptimizer optimizer = (LossScalingOptimizer) config.getOptimizer();
                assertTrue(optimizer.isFused(), setting + " fuses Nag");
                List<float[]> after = RealProgramsRig.values(block);
                float largest = 0;
                for (int i = 0; i < before.size(); i++) {
                    largest =
                            Math.max(
                                    largest,
                                    RealProgramsRig.largestChange(before.get(i), after.get(i)));
                }
                assertTrue(largest > 0, "the weights moved");
                return after;
            }
        }
    }

    @Test
    void autoFusesNagOnTheCpuAsOnDoes() throws Exception {
        // AUTO itself: the suite's second pass sets -Ddjlamp.fusedOptimizer=off, which decides
        // for AUTO when options are built
        String property = System.clearProperty(FusedOptimizer.PROPERTY);
        List<float[]> auto;
        try {
            auto = trainNag(FusedOptimizer.AUTO);
        } finally {
            if (property != null) {
                System.setProperty(FusedOptimizer.PROPERTY, property);
            }
        }
        List<float[]> on = trainNag(FusedOptimizer.ON);
        for (int i = 0; i < auto.size(); i++) {
            assertArrayEquals(on.get(i), auto.get(i), "the same fused step, parameter " + i);
        }
    }

    @Test
    void djlsOwnUpdateOfNagIsRefusedWithTheFusedStepNamed() {
        Engine.getInstance().setRandomSeed(8);
        try (Model model = Model.newInstance("nag-off", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            AmpOptions off = AmpOptions.builder().fusedOptimizer(FusedOptimizer.OFF).build();
            try (Trainer trainer = model.newTrainer(Amp.configure(nag(), block, off));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                List<float[]> before = RealProgramsRig.values(block);
                AmpException e =
                        assertThrows(
                                AmpException.class,
                                () ->
                                        EasyTrain.fit(
                                                trainer, 1, RealProgramsRig.data(data, 1), null));
                for (String part :
                        new String[] {
                            "DJL's Nag has no update",
                            "nagUpdate",
                            "Not implemented",
                            "plain DJL fails the same way",
                            "fusedOptimizer(FusedOptimizer.ON)"
                        }) {
                    assertTrue(e.getMessage().contains(part), e.getMessage());
                }
                List<float[]> after = RealProgramsRig.values(block);
                for (int i = 0; i < before.size(); i++) {
                    assertArrayEquals(before.get(i), after.get(i), "no weight was changed");
                }
            }
        }
    }
}
