package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.train.AmpSession;
import org.junit.jupiter.api.Test;

/**
 * The set of trainable parameters may change between steps (fine-tuning freezes and unfreezes
 * layers): an unfrozen layer's gradients are unscaled and checked like the others, and a layer
 * frozen later is left alone.
 */
class FreezeMidTrainingTest {

    @Test
    void unfreezingAndFreezingLayersMidTrainingUnderFp16() {
        unfreezeThenFreeze(FusedOptimizer.OFF);
    }

    @Test
    void unfreezingAndFreezingLayersMidTrainingWithFusedOptimizerSteps() {
        unfreezeThenFreeze(FusedOptimizer.ON);
    }

    private static void unfreezeThenFreeze(FusedOptimizer fused) {
        Engine.getInstance().setRandomSeed(11);
        RealProgramsRig.Mlp mlp = new RealProgramsRig.Mlp();
        try (Model model = Model.newInstance("freeze", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(mlp.block, "mixed_float16");
            model.setBlock(block);
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(
                                            RealProgramsRig.sgd(0.1f),
                                            block,
                                            AmpOptions.builder().fusedOptimizer(fused).build()));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                mlp.first.freezeParameters(true);
                for (int i = 0; i < 2; i++) {
                    task.trainStep(trainer, i);
                }
                float[] firstBefore =
                        mlp.first.getParameters().get("weight").getArray().toFloatArray();

                mlp.first.freezeParameters(false); // unfreeze: its gradients are scaled by 2^16
                task.trainStep(trainer, 2);
                float[] firstAfter =
                        mlp.first.getParameters().get("weight").getArray().toFloatArray();
                float change = RealProgramsRig.largestChange(firstBefore, firstAfter);
                assertTrue(change > 0, "the unfrozen layer trains");
                // lr 0.1 times a true gradient of order 1; unscaled it would be ~1e4
                assertTrue(change < 1f, "the unfrozen layer's step is unscaled: " + change);

                mlp.last.freezeParameters(true); // freeze later: the next step must not throw
                float[] lastBefore =
                        mlp.last.getParameters().get("weight").getArray().toFloatArray();
                assertDoesNotThrow(() -> task.trainStep(trainer, 3));
                assertArrayEquals(
                        lastBefore,
                        mlp.last.getParameters().get("weight").getArray().toFloatArray(),
                        "a frozen layer stays as it is");
                AmpSession amp = AmpSession.of(trainer);
                assertEquals(0, amp.getScaler().getSkippedSteps());
                assertEquals(
                        fused == FusedOptimizer.ON,
                        amp.getScaler().isStateOnDevice(),
                        "the path under test");
            }
        }
    }
}
