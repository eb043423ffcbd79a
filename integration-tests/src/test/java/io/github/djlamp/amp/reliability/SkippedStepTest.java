package io.github.djlamp.amp.reliability;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Blocks;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.train.AmpSession;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A skipped step changes nothing: weights, and BatchNorm's running statistics, which the forward
 * pass of an overflowing batch would otherwise have moved.
 */
class SkippedStepTest {

    private static Map<String, float[]> state(Model model) {
        Map<String, float[]> values = new LinkedHashMap<>();
        for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
            values.put(p.getKey(), p.getValue().getArray().toFloatArray());
        }
        return values;
    }

    private static void step(Trainer trainer, float poison) {
        NDManager m = trainer.getManager().newSubManager();
        NDArray x = m.randomNormal(new Shape(4, 1, 6, 6)).mul(poison);
        NDArray y = m.randomInteger(0, 3, new Shape(4), DataType.INT32);
        Batch batch = new Batch(m, new NDList(x), new NDList(y), 4, null, null, 0, 1);
        EasyTrain.trainBatch(trainer, batch);
        trainer.step();
        batch.close();
    }

    @ParameterizedTest
    @ValueSource(floats = {Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN})
    void weightsAndRunningStatisticsSurviveAnOverflowingBatch(float poison) {
        Engine.getInstance().setRandomSeed(21);
        try (Model model = bnModel()) {
            trainThenOverflow(model, poison);
        }
    }

    /** The copies of the running statistics belong to one trainer: a second one makes its own. */
    @Test
    void aSecondTrainerOnTheSameModelStillRestoresTheRunningStatistics() {
        Engine.getInstance().setRandomSeed(21);
        try (Model model = bnModel()) {
            trainThenOverflow(model, Float.POSITIVE_INFINITY);
            trainThenOverflow(model, Float.NaN);
        }
    }

    private static Model bnModel() {
        Model model = Model.newInstance("bn", "PyTorch");
        model.setBlock(
                Amp.wrap(
                        new SequentialBlock()
                                .add(
                                        Conv2d.builder()
                                                .setKernelShape(new Shape(3, 3))
                                                .setFilters(8)
                                                .build())
                                .add(BatchNorm.builder().build())
                                .add(Activation.reluBlock())
                                .add(Blocks.batchFlattenBlock())
                                .add(Linear.builder().setUnits(3).build()),
                        "mixed_float16"));
        return model;
    }

    private static void trainThenOverflow(Model model, float poison) {
        DefaultTrainingConfig config =
                new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                        .optOptimizer(
                                Optimizer.adam()
                                        .optLearningRateTracker(Tracker.fixed(0.01f))
                                        .build());
        try (Trainer trainer = model.newTrainer(Amp.configure(config, model.getBlock()))) {
            trainer.initialize(new Shape(4, 1, 6, 6));
            for (int i = 0; i < 3; i++) {
                step(trainer, 1f);
            }
            AmpSession amp = AmpSession.of(trainer);
            long skipped = amp.getScaler().getSkippedSteps();
            Map<String, float[]> before = state(model);
            step(trainer, poison);
            assertEquals(skipped + 1, amp.getScaler().getSkippedSteps());
            Map<String, float[]> after = state(model);
            for (String name : before.keySet()) {
                assertArrayEquals(before.get(name), after.get(name), name);
            }
            step(trainer, 1f);
            for (float v : state(model).get("02BatchNorm_runningVar")) {
                assertFalse(Float.isNaN(v) || Float.isInfinite(v), "running variance " + v);
            }
        }
    }
}
