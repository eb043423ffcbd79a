package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.listener.TrainingListenerAdapter;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.LossScalingOptimizer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A step whose gradients hold Inf or NaN is skipped as PyTorch's GradScaler skips it: the weights
 * (BatchNorm's running statistics included) and Adam's state stay bit for bit as they were, the
 * scale halves, the bad gradient does not leak into the next step, and the next step trains
 * normally.
 */
class OverflowSkipTest {

    private static final int BAD_STEP = 3;
    private static final float INIT_SCALE = 1024f;

    /**
     * DJL's own Adam updates, whose moments and update counts this test reads from DJL's optimizer
     * (fused steps, the GPU default, keep their own: FusedOptimizerTrainingTest).
     */
    private static AmpOptions djlsOwnAdam() {
        return AmpOptions.builder()
                .lossScaling(LossScaling.dynamicBuilder().initScale(INIT_SCALE).build())
                .fusedOptimizer(FusedOptimizer.OFF)
                .build();
    }

    @ParameterizedTest(name = "gradient element = {0}")
    @ValueSource(floats = {Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN})
    void oneNonFiniteGradientElementSkipsTheStepInACustomLoop(float bad) {
        Engine.getInstance().setRandomSeed(3);
        try (Model model = Model.newInstance("overflow", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(model(), "mixed_float16");
            model.setBlock(block);
            Optimizer adam = Optimizer.adam().optLearningRateTracker(Tracker.fixed(0.01f)).build();
            AmpTrainingConfig config =
                    Amp.configure(
                            new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                                    .optOptimizer(adam),
                            block,
                            djlsOwnAdam());
            Optimizer inner = ((LossScalingOptimizer) config.getOptimizer()).getInner();
            assertSame(adam, inner);
            try (Trainer trainer = model.newTrainer(config);
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                AmpSession amp = AmpSession.of(trainer);
                LossScaler scaler = amp.getScaler();
                ToyTask task = new ToyTask(data);
                Parameter victim = block.getParameters().get(0).getValue();

                List<Float> losses = new ArrayList<>();
                for (int i = 0; i < BAD_STEP; i++) {
                    StepResult r = step(trainer, amp, task, i, m -> {});
                    assertFalse(r.overflow, "step " + i + " overflowed by itself");
                    losses.add(r.loss);
                }
                assertEquals(INIT_SCALE, scaler.getScale());
                assertEquals(0, scaler.getSkippedSteps());
                Map<String, Snapshots.Bits> weightsBefore = Snapshots.weights(block);
                Snapshots.AdamState adamBefore = Snapshots.adam(inner);
                assertEquals(BAD_STEP, adamBefore.numUpdate, "Adam has state before step k");
                assertFalse(adamBefore.means.isEmpty());

                StepResult skipped =
                        step(
                                trainer,
                                amp,
                                task,
                                BAD_STEP,
                                m -> poison(victim, bad, m, scaler.getScale()));

                assertTrue(skipped.overflow, "the step reports the overflow");
                assertTrue(skipped.skippingBetweenCheckAndStep, "session says skip");
                assertEquals(1, scaler.getSkippedSteps(), "skipped steps + 1");
                assertEquals(BAD_STEP + 1, scaler.getSteps(), "the skipped step is counted");
                assertEquals(INIT_SCALE * 0.5f, scaler.getScale(), "scale halved exactly");
                assertEquals(0, scaler.getGrowthTracker(), "growth tracker reset");
                assertEquals(weightsBefore, Snapshots.weights(block), "weights bitwise unchanged");
                assertEquals(adamBefore, Snapshots.adam(inner), "Adam state bitwise unchanged");
                assertGradientsCleared(block, data);

                StepResult next = step(trainer, amp, task, BAD_STEP + 1, m -> {});
                assertFalse(next.overflow, "the bad gradient leaked into the next step");
                assertEquals(1, scaler.getSkippedSteps());
                assertEquals(INIT_SCALE * 0.5f, scaler.getScale());
                Map<String, Snapshots.Bits> weightsAfter = Snapshots.weights(block);
                for (Map.Entry<String, Snapshots.Bits> e : weightsAfter.entrySet()) {
                    assertNotEquals(
                            weightsBefore.get(e.getKey()), e.getValue(), e.getKey() + " updated");
                    assertTrue(e.getValue().allFinite(), e.getKey() + " finite");
                }
                Snapshots.AdamState adamAfter = Snapshots.adam(inner);
                assertEquals(BAD_STEP + 1, adamAfter.numUpdate, "Adam counted one more update");
                for (Map.Entry<String, Integer> e : adamAfter.updateCounts.entrySet()) {
                    assertEquals(
                            adamBefore.updateCounts.get(e.getKey()) + 1,
                            e.getValue(),
                            e.getKey() + " update count");
                }

                for (int i = BAD_STEP + 2; i < 40; i++) {
                    StepResult r = step(trainer, amp, task, i, m -> {});
                    assertFalse(r.overflow, "step " + i);
                    losses.add(r.loss);
                }
                float first = losses.get(0);
                float last = losses.get(losses.size() - 1);
                System.out.printf(
                        "bad gradient %s: skipped step %d, scale %s -> %s, loss %.4f -> %.4f%n",
                        bad, BAD_STEP, INIT_SCALE, scaler.getScale(), first, last);
                assertTrue(last < first * 0.7f, "keeps training: loss " + first + " -> " + last);
            }
        }
    }

    @Test
    void anInfiniteLossSkipsTheStepThroughEasyTrain() throws Exception {
        Engine.getInstance().setRandomSeed(5);
        int badBatch = 4;
        try (Model model = Model.newInstance("inf-loss", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(model(), "mixed_float16");
            model.setBlock(block);
            Watcher watcher = new Watcher(block);
            InfiniteAt loss = new InfiniteAt(Loss.softmaxCrossEntropyLoss(), watcher, badBatch);
            AmpTrainingConfig config =
                    Amp.configure(
                            new DefaultTrainingConfig(loss)
                                    .optOptimizer(
                                            Optimizer.adam()
                                                    .optLearningRateTracker(Tracker.fixed(0.01f))
                                                    .build())
                                    .addTrainingListeners(watcher),
                            block,
                            LossScaling.dynamicBuilder().initScale(INIT_SCALE).build());
            try (Trainer trainer = model.newTrainer(config);
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                ArrayDataset dataset =
                        new ArrayDataset.Builder()
                                .setData(task.x)
                                .optLabels(task.y)
                                .setSampling(ToyTask.BATCH, false)
                                .build();
                EasyTrain.fit(trainer, 2, dataset, null);

                LossScaler scaler = AmpSession.of(trainer).getScaler();
                int batches = watcher.batch();
                assertEquals(8, batches);
                assertEquals(1, scaler.getSkippedSteps(), "exactly the poisoned step skipped");
                assertEquals(batches, scaler.getSteps());
                assertTrue(loss.poisoned, "the loss was made infinite");
                for (int i = 0; i < batches; i++) {
                    float expected = i < badBatch ? INIT_SCALE : INIT_SCALE * 0.5f;
                    assertEquals(expected, watcher.scales.get(i), "scale after batch " + i);
                }
                // Watcher sees batch i after its forward and the AMP check, before its step:
                // trained parameters as after step i - 1, running statistics as after forward i
                // (restored to before forward i when step i is skipped).
                assertEquals(
                        watcher.trained.get(badBatch),
                        watcher.trained.get(badBatch + 1),
                        "trained parameters bitwise unchanged across the skipped step");
                assertNotEquals(
                        watcher.trained.get(badBatch - 1),
                        watcher.trained.get(badBatch),
                        "the step before was applied");
                assertNotEquals(
                        watcher.trained.get(badBatch + 1),
                        watcher.trained.get(badBatch + 2),
                        "the step after was applied");
                assertEquals(
                        watcher.statistics.get(badBatch - 1),
                        watcher.statistics.get(badBatch),
                        "running statistics restored: the poisoned forward left no trace");
                assertNotEquals(
                        watcher.statistics.get(badBatch),
                        watcher.statistics.get(badBatch + 1),
                        "running statistics move again with the next batch");
                for (Snapshots.Bits bits : Snapshots.weights(block).values()) {
                    assertTrue(bits.allFinite(), "final weights finite");
                }
            }
        }
    }

    /**
     * Linear 32, BatchNorm, ReLU, Linear 4: BatchNorm's running statistics move in every training
     * forward, so "every weight unchanged" covers them too (djl-amp restores them on a skip).
     */
    private static Block model() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(32).build())
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(ToyTask.CLASSES).build());
    }

    /** Sets one element of a parameter's real gradient, and checks it took. */
    private static void poison(Parameter parameter, float value, NDManager step, float scale) {
        NDArray grad = parameter.getArray().getGradient();
        grad.attach(step);
        grad.set(new NDIndex(0, 0), value);
        NDArray check = parameter.getArray().getGradient();
        check.attach(step);
        float seen = check.get(0, 0).getFloat();
        assertEquals(value, seen, "the injected value is in the real gradient");
    }

    private static void assertGradientsCleared(Block block, NDManager manager) {
        for (Pair<String, Parameter> p : block.getParameters()) {
            if (!p.getValue().requiresGradient()) {
                continue;
            }
            NDArray grad = p.getValue().getArray().getGradient();
            grad.attach(manager);
            for (float v : grad.toFloatArray()) {
                if (v != 0f) {
                    throw new AssertionError(
                            "gradient of " + p.getKey() + " not cleared after the skip: " + v);
                }
            }
            grad.close();
        }
    }

    private static StepResult step(
            Trainer trainer, AmpSession amp, ToyTask task, int i, Consumer<NDManager> inject) {
        Loss loss = Loss.softmaxCrossEntropyLoss();
        try (NDManager step = trainer.getManager().newSubManager()) {
            NDArray x = task.x.get(task.rows(i));
            NDArray y = task.y.get(task.rows(i));
            x.attach(step);
            y.attach(step);
            float lossValue;
            try (GradientCollector collector = trainer.newGradientCollector()) {
                NDArray l = loss.evaluate(new NDList(y), trainer.forward(new NDList(x)));
                collector.backward(amp.scale(l));
                lossValue = l.getFloat();
            }
            inject.accept(step);
            long skippedBefore = amp.getScaler().getSkippedSteps();
            amp.unscaleGradients();
            boolean skipping = amp.isSkipping();
            amp.step();
            boolean overflow = amp.getScaler().getSkippedSteps() > skippedBefore;
            return new StepResult(overflow, skipping, lossValue);
        }
    }

    private static final class StepResult {
        final boolean overflow;
        final boolean skippingBetweenCheckAndStep;
        final float loss;

        StepResult(boolean overflow, boolean skipping, float loss) {
            this.overflow = overflow;
            this.skippingBetweenCheckAndStep = skipping;
            this.loss = loss;
        }
    }

    /**
     * Records, after the AMP listener's check and update of each batch, the scale, the trained
     * parameters and the running statistics.
     */
    private static final class Watcher extends TrainingListenerAdapter {
        final Block block;
        final List<Float> scales = new ArrayList<>();
        final List<Map<String, Snapshots.Bits>> trained = new ArrayList<>();
        final List<Map<String, Snapshots.Bits>> statistics = new ArrayList<>();

        Watcher(Block block) {
            this.block = block;
        }

        int batch() {
            return trained.size();
        }

        @Override
        public void onTrainingBatch(Trainer trainer, BatchData batchData) {
            scales.add(AmpSession.of(trainer).getScaler().getScale());
            trained.add(Snapshots.weights(block, Parameter::requiresGradient));
            statistics.add(Snapshots.weights(block, p -> !p.requiresGradient()));
        }
    }

    /** The user's loss, made infinite on one training batch. */
    private static final class InfiniteAt extends Loss {
        final Loss inner;
        final Watcher watcher;
        final int badBatch;
        boolean poisoned;

        InfiniteAt(Loss inner, Watcher watcher, int badBatch) {
            super("infiniteAt" + badBatch);
            this.inner = inner;
            this.watcher = watcher;
            this.badBatch = badBatch;
        }

        @Override
        public NDArray evaluate(NDList labels, NDList predictions) {
            NDArray loss = inner.evaluate(labels, predictions);
            if (watcher.batch() == badBatch) {
                poisoned = true;
                // backward reads the Inf: made by the engine (GcSafe), not by DJL's mul(Number)
                return GcSafe.mul(loss, Float.POSITIVE_INFINITY);
            }
            return loss;
        }
    }
}
