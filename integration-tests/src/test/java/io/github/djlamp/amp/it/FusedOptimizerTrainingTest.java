package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.LossScalingOptimizer;
import java.util.Map;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * Training with fused optimizer steps: the same weights as DJL's per-parameter updates to within
 * rounding, and a skipped step that leaves every weight bitwise unchanged with cleared gradients.
 */
class FusedOptimizerTrainingTest {

    private static final int STEPS = 6;
    private static final int BAD_STEP = 3;

    private static Block model() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(16).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(ToyTask.CLASSES).build());
    }

    @Test
    void fusedSgdAdamAndAdamWTrainLikeDjlsOwnUpdates() {
        check(
                () ->
                        Optimizer.sgd()
                                .setLearningRateTracker(Tracker.fixed(0.05f))
                                .optMomentum(0.9f)
                                .optWeightDecays(1e-3f)
                                .build());
        check(
                () ->
                        Optimizer.adam()
                                .optLearningRateTracker(Tracker.fixed(0.01f))
                                .optWeightDecays(1e-3f)
                                .build());
        check(
                () ->
                        Optimizer.adamW()
                                .optLearningRateTracker(Tracker.fixed(0.01f))
                                .optWeightDecays(1e-2f)
                                .build());
    }

    private static void check(Supplier<Optimizer> optimizer) {
        Map<String, Snapshots.Bits> djl = train(optimizer.get(), false, -1);
        Map<String, Snapshots.Bits> fused = train(optimizer.get(), true, -1);
        assertEquals(djl.keySet(), fused.keySet());
        for (String name : djl.keySet()) {
            int[] expected = djl.get(name).bits;
            int[] actual = fused.get(name).bits;
            for (int i = 0; i < expected.length; i++) {
                float want = Float.intBitsToFloat(expected[i]);
                assertEquals(
                        want,
                        Float.intBitsToFloat(actual[i]),
                        1e-5f * Math.max(1f, Math.abs(want)),
                        name + "[" + i + "]");
            }
        }
    }

    @Test
    void aSkippedFusedStepChangesNoWeightAndClearsTheGradients() {
        Optimizer adam = Optimizer.adam().optLearningRateTracker(Tracker.fixed(0.01f)).build();
        train(adam, true, BAD_STEP);
    }

    /** Trains STEPS custom-loop steps in mixed fp16; poisons one gradient at {@code badStep}. */
    private static Map<String, Snapshots.Bits> train(
            Optimizer optimizer, boolean fused, int badStep) {
        Engine.getInstance().setRandomSeed(11);
        String before = System.getProperty(LossScalingOptimizer.FUSED_PROPERTY);
        System.setProperty(LossScalingOptimizer.FUSED_PROPERTY, Boolean.toString(fused));
        try (Model model = Model.newInstance("fused", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(model(), "mixed_float16");
            model.setBlock(block);
            AmpTrainingConfig config =
                    Amp.configure(
                            new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                                    .optOptimizer(optimizer),
                            block,
                            LossScaling.dynamicBuilder().initScale(1024f).build());
            try (Trainer trainer = model.newTrainer(config);
                    NDManager data = trainer.getManager().newSubManager()) {
                assertEquals(fused, ((LossScalingOptimizer) config.getOptimizer()).isFused());
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                AmpSession amp = AmpSession.of(trainer);
                ToyTask task = new ToyTask(data);
                Loss loss = Loss.softmaxCrossEntropyLoss();
                Map<String, Snapshots.Bits> weights = null;
                for (int i = 0; i < STEPS; i++) {
                    try (NDManager step = trainer.getManager().newSubManager()) {
                        NDArray x = task.x.get(task.rows(i));
                        NDArray y = task.y.get(task.rows(i));
                        x.attach(step);
                        y.attach(step);
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            NDArray l =
                                    loss.evaluate(new NDList(y), trainer.forward(new NDList(x)));
                            collector.backward(amp.scale(l));
                        }
                        if (i == badStep) {
                            Parameter victim = block.getParameters().get(0).getValue();
                            NDArray grad = victim.getArray().getGradient();
                            grad.attach(step);
                            grad.set(new NDIndex(0, 0), Float.NaN);
                        }
                        Map<String, Snapshots.Bits> previous = Snapshots.weights(block);
                        amp.unscaleGradients();
                        assertEquals(i == badStep, amp.isSkipping(), "step " + i);
                        amp.step();
                        weights = Snapshots.weights(block);
                        if (i == badStep) {
                            assertEquals(previous, weights, "skipped: weights bitwise unchanged");
                            assertGradientsCleared(block, step);
                        } else {
                            assertFalse(previous.equals(weights), "step " + i + " applied");
                        }
                    }
                }
                if (badStep >= 0) {
                    assertEquals(1, amp.getScaler().getSkippedSteps());
                }
                return weights;
            }
        } finally {
            if (before == null) {
                System.clearProperty(LossScalingOptimizer.FUSED_PROPERTY);
            } else {
                System.setProperty(LossScalingOptimizer.FUSED_PROPERTY, before);
            }
        }
    }

    private static void assertGradientsCleared(Block block, NDManager manager) {
        for (Pair<String, Parameter> p : block.getParameters()) {
            NDArray grad = p.getValue().getArray().getGradient();
            grad.attach(manager);
            for (float v : grad.toFloatArray()) {
                assertTrue(v == 0f, "gradient of " + p.getKey() + " cleared, got " + v);
            }
        }
    }
}
