package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.LossScalingOptimizer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Fused Adam steps follow the trainable set as it changes (fine-tuning): a layer frozen from the
 * start has no fused state until it trains and then starts from zero moments; a layer frozen
 * mid-run keeps its weights and moments bitwise until it trains again.
 */
class FusedTrainableSetChangesTest {

    @Test
    void fusedAdamStateFollowsFreezingAndUnfreezing() {
        Engine.getInstance().setRandomSeed(11);
        RealProgramsRig.Mlp mlp = new RealProgramsRig.Mlp();
        try (Model model = Model.newInstance("fused-freeze", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(mlp.block, "mixed_float16");
            model.setBlock(block);
            AmpTrainingConfig config =
                    Amp.configure(
                            new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                                    .optOptimizer(
                                            Optimizer.adam()
                                                    .optLearningRateTracker(Tracker.fixed(0.01f))
                                                    .build()),
                            block,
                            AmpOptions.builder()
                                    .lossScaling(
                                            LossScaling.dynamicBuilder().initScale(1024f).build())
                                    .fusedOptimizer(FusedOptimizer.ON)
                                    .build());
            LossScalingOptimizer optimizer = (LossScalingOptimizer) config.getOptimizer();
            try (Trainer trainer = model.newTrainer(config);
                    NDManager data = trainer.getManager().newSubManager()) {
                assertTrue(optimizer.isFused());
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                Parameter firstWeight = mlp.first.getParameters().get("weight");
                mlp.first.freezeParameters(true);
                List<float[]> frozenFirst = values(new NDList(firstWeight.getArray()));
                for (int i = 0; i < 2; i++) {
                    task.trainStep(trainer, i);
                }
                assertEquals(0, optimizer.getFusedState(firstWeight.getId()).size());
                assertSame(frozenFirst, values(new NDList(firstWeight.getArray())), "frozen");

                mlp.first.freezeParameters(false);
                task.trainStep(trainer, 2);
                NDList moments = optimizer.getFusedState(firstWeight.getId());
                assertEquals(2, moments.size(), "the unfrozen layer gets its moments");
                assertFalse(
                        sameBits(frozenFirst, values(new NDList(firstWeight.getArray()))),
                        "the unfrozen layer trains");
                assertFreshMoments(moments);

                Linear last = mlp.last;
                Parameter lastWeight = last.getParameters().get("weight");
                mlp.last.freezeParameters(true);
                NDList lastState =
                        new NDList(lastWeight.getArray())
                                .addAll(optimizer.getFusedState(lastWeight.getId()));
                List<float[]> frozenLast = values(lastState);
                task.trainStep(trainer, 3);
                assertSame(frozenLast, values(lastState), "frozen mid-run: weights and moments");
                mlp.last.freezeParameters(false);
                task.trainStep(trainer, 4);
                assertFalse(sameBits(frozenLast, values(lastState)), "trains again");

                // a replaced head: fresh moments for it, the old head's left as they were
                List<float[]> oldHead = values(lastState);
                mlp.block.removeLastBlock();
                Linear head = Linear.builder().setUnits(ToyTask.CLASSES).build();
                mlp.block.add(head);
                head.initialize(
                        model.getNDManager(), DataType.FLOAT32, new Shape(ToyTask.BATCH, 8));
                Parameter headWeight = head.getParameters().get("weight");
                float[] headBefore = headWeight.getArray().toFloatArray();
                task.trainStep(trainer, 5);
                assertFalse(
                        sameBits(List.of(headBefore), values(new NDList(headWeight.getArray()))),
                        "the new head trains");
                assertFreshMoments(optimizer.getFusedState(headWeight.getId()));
                assertSame(oldHead, values(lastState), "the replaced head's state");
            }
        }
    }

    /** Zero moments before a parameter's first step: m = (1 - beta1) g, v = (1 - beta2) g^2. */
    private static void assertFreshMoments(NDList moments) {
        assertEquals(2, moments.size(), "Adam's moments");
        float[] m = moments.get(0).toFloatArray();
        float[] v = moments.get(1).toFloatArray();
        for (int i = 0; i < m.length; i++) {
            assertEquals(0.001f * m[i] * m[i] / 0.01f, v[i], 1e-6f + 1e-3f * v[i]);
        }
    }

    private static List<float[]> values(NDList arrays) {
        List<float[]> values = new ArrayList<>();
        for (NDArray array : arrays) {
            values.add(array.toFloatArray());
        }
        return values;
    }

    private static boolean sameBits(List<float[]> a, List<float[]> b) {
        for (int i = 0; i < a.size(); i++) {
            for (int j = 0; j < a.get(i).length; j++) {
                if (Float.floatToRawIntBits(a.get(i)[j]) != Float.floatToRawIntBits(b.get(i)[j])) {
                    return false;
                }
            }
        }
        return true;
    }

    private static void assertSame(List<float[]> expected, List<float[]> actual, String what) {
        for (int i = 0; i < expected.size(); i++) {
            assertArrayEquals(expected.get(i), actual.get(i), what + ", array " + i);
        }
    }
}
