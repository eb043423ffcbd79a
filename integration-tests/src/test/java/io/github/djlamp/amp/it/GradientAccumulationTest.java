package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.initializer.ConstantInitializer;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.train.AmpSession;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Several batches' gradients add up into one step, with one scale, skipped as one. */
class GradientAccumulationTest {

    private static Block linear() {
        Block block = Linear.builder().setUnits(3).build();
        block.setInitializer(new ConstantInitializer(0.1f), Parameter.Type.WEIGHT);
        return block;
    }

    private static DefaultTrainingConfig sgd() {
        return new DefaultTrainingConfig(GcSafe.l2Loss())
                .optOptimizer(Optimizer.sgd().setLearningRateTracker(Tracker.fixed(0.1f)).build());
    }

    private static List<float[]> weights(Block block) {
        List<float[]> result = new ArrayList<>();
        for (Pair<String, Parameter> p : block.getParameters()) {
            result.add(p.getValue().getArray().toFloatArray());
        }
        return result;
    }

    private static Batch batch(NDManager manager, float offset) {
        NDManager batchManager = manager.newSubManager();
        NDArray x = batchManager.arange(8f).reshape(2, 4).add(offset);
        NDArray y = batchManager.ones(new Shape(2, 3)).mul(offset);
        return new Batch(batchManager, new NDList(x), new NDList(y), 2, null, null, 0, 1);
    }

    /** Plain DJL: two backward passes (DJL adds gradients), then one step. */
    private static List<float[]> reference(float... offsets) {
        try (Model model = Model.newInstance("ref", "PyTorch")) {
            model.setBlock(linear());
            try (Trainer trainer = model.newTrainer(sgd())) {
                trainer.initialize(new Shape(2, 4));
                for (float offset : offsets) {
                    try (Batch b = batch(trainer.getManager(), offset);
                            GradientCollector collector = trainer.newGradientCollector()) {
                        NDArray loss =
                                trainer.getLoss()
                                        .evaluate(b.getLabels(), trainer.forward(b.getData()));
                        collector.backward(loss);
                    }
                }
                trainer.step();
                return weights(model.getBlock());
            }
        }
    }

    @Test
    void easyTrainAccumulatesIntoOneStep() {
        Engine.getInstance().setRandomSeed(3);
        List<float[]> expected = reference(1f, 2f);
        try (Model model = Model.newInstance("acc", "PyTorch")) {
            model.setBlock(Amp.wrap(linear(), "float32"));
            AmpOptions options = AmpOptions.builder().accumulationSteps(2).build();
            try (Trainer trainer =
                    model.newTrainer(Amp.configure(sgd(), model.getBlock(), options))) {
                trainer.initialize(new Shape(2, 4));
                List<float[]> before = weights(model.getBlock());
                try (Batch b = batch(trainer.getManager(), 1f)) {
                    EasyTrain.trainBatch(trainer, b);
                    trainer.step();
                }
                List<float[]> afterFirst = weights(model.getBlock());
                for (int i = 0; i < before.size(); i++) {
                    assertArrayEquals(before.get(i), afterFirst.get(i), "no update mid-window");
                }
                try (Batch b = batch(trainer.getManager(), 2f)) {
                    EasyTrain.trainBatch(trainer, b);
                    trainer.step();
                }
                List<float[]> actual = weights(model.getBlock());
                for (int i = 0; i < expected.size(); i++) {
                    assertArrayEquals(expected.get(i), actual.get(i), 1e-6f, "parameter " + i);
                }
                assertEquals(1, AmpSession.of(trainer).getScaler().getSteps());
            }
        }
    }

    @Test
    void anOverflowInAnyMicroBatchSkipsTheWholeStep() {
        try (Model model = Model.newInstance("acc", "PyTorch")) {
            model.setBlock(Amp.wrap(linear(), "float32"));
            AmpOptions options =
                    AmpOptions.builder()
                            .accumulationSteps(2)
                            .lossScaling(io.github.djlamp.amp.scale.LossScaling.dynamic())
                            .build();
            try (Trainer trainer =
                    model.newTrainer(Amp.configure(sgd(), model.getBlock(), options))) {
                trainer.initialize(new Shape(2, 4));
                List<float[]> before = weights(model.getBlock());
                try (Batch b = batch(trainer.getManager(), Float.POSITIVE_INFINITY)) {
                    EasyTrain.trainBatch(trainer, b);
                    trainer.step();
                }
                try (Batch b = batch(trainer.getManager(), 2f)) {
                    EasyTrain.trainBatch(trainer, b);
                    trainer.step();
                }
                List<float[]> after = weights(model.getBlock());
                for (int i = 0; i < before.size(); i++) {
                    assertArrayEquals(before.get(i), after.get(i), "skipped as one");
                }
                AmpSession amp = AmpSession.of(trainer);
                assertEquals(1, amp.getScaler().getSkippedSteps());
                assertEquals(32768f, amp.getScaler().getScale());
                for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
                    for (float g : p.getValue().getArray().getGradient().toFloatArray()) {
                        assertEquals(0f, g, "gradients cleared after the skip");
                    }
                }
            }
        }
    }

    @Test
    void accumulationStepsMustBePositive() {
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> AmpOptions.builder().accumulationSteps(0));
        assertEquals(true, e.getMessage().contains(">= 1"), e.getMessage());
    }
}
