package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import org.junit.jupiter.api.Test;

/**
 * A scaler state saved with the model is restored only where it belongs: under the same loss
 * scaling. A user's explicit setting on a later trainer wins, and no state is written when scaling
 * is off.
 */
class ScalerStateRestoreTest {

    private static final float INIT = 1024f;

    /** Trains {@code steps} steps with the default optimizer path; see the next. */
    private static float[] train(Model model, MixedPrecisionBlock block, LossScaling s, int steps) {
        return train(model, block, s, steps, FusedOptimizer.AUTO);
    }

    /** Trains {@code steps} steps and returns the scaler's scale and steps when it starts. */
    private static float[] train(
            Model model,
            MixedPrecisionBlock block,
            LossScaling s,
            int steps,
            FusedOptimizer fused) {
        AmpOptions options = AmpOptions.builder().lossScaling(s).fusedOptimizer(fused).build();
        try (Trainer trainer =
                        model.newTrainer(Amp.configure(RealProgramsRig.sgd(0.1f), block, options));
                NDManager data = trainer.getManager().newSubManager()) {
            trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
            LossScaler scaler = AmpSession.of(trainer).getScaler();
            if (fused != FusedOptimizer.AUTO) {
                assertEquals(
                        fused == FusedOptimizer.ON && scaler.getConfig().isEnabled(),
                        scaler.isStateOnDevice(),
                        "the path under test");
            }
            float[] start = {scaler.getScale(), scaler.getSteps()};
            ToyTask task = new ToyTask(data);
            for (int i = 0; i < steps; i++) {
                task.trainStep(trainer, i);
            }
            return start;
        }
    }

    @Test
    void explicitSettingsWinOverASavedState() {
        explicitSettingsWinOverASavedState(FusedOptimizer.OFF);
    }

    /** Fused steps keep the state on the device: what the trainer saves is still current. */
    @Test
    void explicitSettingsWinOverASavedStateWithFusedSteps() {
        explicitSettingsWinOverASavedState(FusedOptimizer.ON);
    }

    private void explicitSettingsWinOverASavedState(FusedOptimizer fused) {
        Engine.getInstance().setRandomSeed(2);
        try (Model model = Model.newInstance("restore", "PyTorch")) {
            // fp32 compute keeps it fast; loss scaling runs as under fp16
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            LossScaling dynamic = LossScaling.dynamicBuilder().initScale(INIT).build();
            train(model, block, dynamic, 3, fused);

            float[] resumed = train(model, block, dynamic, 1, fused);
            assertEquals(INIT, resumed[0], "the same configuration resumes");
            assertEquals(3f, resumed[1], "with the saved counters");

            train(model, block, dynamic, 2, fused);
            float[] again = train(model, block, dynamic, 0, fused);
            assertEquals(6f, again[1], "the resumed run's steps saved too");

            float[] explicit =
                    train(
                            model,
                            block,
                            LossScaling.dynamicBuilder().initScale(0x1p20f).build(),
                            1,
                            fused);
            assertEquals(0x1p20f, explicit[0], "an explicit initScale wins");

            float[] fixed = train(model, block, LossScaling.fixed(8f), 1, fused);
            assertEquals(8f, fixed[0], "fixed(8) means 8, whatever was saved");
            assertEquals(0f, fixed[1]);
        }
    }

    @Test
    void aSavedScaleOutsideTheConfiguredBoundsIsIgnored() {
        Engine.getInstance().setRandomSeed(3);
        try (Model model = Model.newInstance("bounds", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            // grows after every clean step: 1024 -> 8192 in three steps
            train(
                    model,
                    block,
                    LossScaling.dynamicBuilder().initScale(INIT).growthInterval(1).build(),
                    3);

            float[] within =
                    train(
                            model,
                            block,
                            LossScaling.dynamicBuilder().initScale(INIT).growthInterval(1).build(),
                            0);
            assertEquals(8 * INIT, within[0], "the same bounds resume the grown scale");

            float[] outside =
                    train(
                            model,
                            block,
                            LossScaling.dynamicBuilder()
                                    .initScale(INIT)
                                    .growthInterval(1)
                                    .maxScale(4 * INIT)
                                    .build(),
                            0);
            assertEquals(INIT, outside[0], "a saved scale above maxScale is not restored");
            assertEquals(0f, outside[1], "nor are its counters");
        }
    }

    @Test
    void noStateIsWrittenWithoutScaling() {
        Engine.getInstance().setRandomSeed(2);
        try (Model model = Model.newInstance("no-scaling", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            train(model, block, null, 2); // fp32's default: no scaling
            assertNull(
                    model.getProperty(AmpSession.SCALER_STATE_PROPERTY),
                    "a run that never scaled leaves no scaler state");
            float[] fp16Like = train(model, block, LossScaling.dynamic(), 1);
            assertEquals(LossScaling.DEFAULT_INIT_SCALE, fp16Like[0]);
        }
    }
}
