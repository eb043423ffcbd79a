package io.github.djlamp.amp.reliability;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
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
import io.github.djlamp.amp.it.GcSafe;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.LossScalingOptimizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * 1,000 steps with Inf, -Inf and NaN injected into random gradients and into the loss at seeded
 * random steps: every injection is a skipped step, no weight ever turns non-finite, and the run
 * ends bitwise where a run that never saw those steps ends, Adam's state included. Each skipped
 * step is also checked on its own to leave weights and Adam state bitwise as they were.
 */
class FaultInjectionTest {

    private static final int STEPS = 1000;
    private static final int BATCH = 32;
    private static final int FEATURES = 12;
    private static final int CLASSES = 4;
    private static final float[] FAULTS = {
        Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN
    };

    /** A fault: the value, and where it goes (-1 for the loss, else a parameter index). */
    private static final class Fault {
        final float value;
        final int target;

        Fault(float value, int target) {
            this.value = value;
            this.target = target;
        }
    }

    private static final class Outcome {
        Map<String, float[]> weights;
        Map<String, String> optimizerState;
        long skipped;
        float accuracy;
    }

    private static Block model() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(32).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(CLASSES).build());
    }

    /** Gaussian blobs: class c is centred at a fixed random point. */
    private static NDList batch(NDManager m, Random data, float[][] centres) {
        float[] x = new float[BATCH * FEATURES];
        float[] y = new float[BATCH];
        for (int i = 0; i < BATCH; i++) {
            int c = data.nextInt(CLASSES);
            y[i] = c;
            for (int f = 0; f < FEATURES; f++) {
                x[i * FEATURES + f] = centres[c][f] + (float) data.nextGaussian();
            }
        }
        return new NDList(m.create(x, new Shape(BATCH, FEATURES)), m.create(y));
    }

    private static Outcome train(String policy, Map<Integer, Fault> faults, boolean dropFaulted) {
        Engine.getInstance().setRandomSeed(17);
        Random data = new Random(5);
        float[][] centres = new float[CLASSES][FEATURES];
        for (float[] centre : centres) {
            for (int f = 0; f < FEATURES; f++) {
                centre[f] = (float) data.nextGaussian() * 1.5f;
            }
        }
        try (Model model = Model.newInstance("faults", "PyTorch")) {
            model.setBlock(Amp.wrap(model(), policy));
            DefaultTrainingConfig base =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.adam()
                                            .optLearningRateTracker(Tracker.fixed(0.003f))
                                            .build());
            // faults every ~40 steps, growth after 20 clean ones: the scale wanders but holds
            LossScaling scaling =
                    LossScaling.dynamicBuilder().growthInterval(20).minScale(1e-6f).build();
            AmpTrainingConfig config = Amp.configure(base, model.getBlock(), scaling);
            try (Trainer trainer = model.newTrainer(config)) {
                trainer.initialize(new Shape(BATCH, FEATURES));
                AmpSession amp = AmpSession.of(trainer);
                List<Parameter> parameters = new ArrayList<>();
                for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
                    parameters.add(p.getValue());
                }
                for (int step = 0; step < STEPS; step++) {
                    try (NDManager m = trainer.getManager().newSubManager()) {
                        NDList xy = batch(m, data, centres);
                        Fault fault = faults.get(step);
                        if (fault != null && dropFaulted) {
                            continue;
                        }
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            NDArray loss =
                                    trainer.getLoss()
                                            .evaluate(
                                                    new NDList(xy.get(1)),
                                                    trainer.forward(new NDList(xy.get(0))));
                            if (fault != null && fault.target < 0) {
                                // every gradient non-finite (GcSafe: backward reads the number)
                                loss = GcSafe.mul(loss, fault.value);
                            }
                            collector.backward(loss);
                        }
                        if (fault != null && fault.target >= 0) {
                            NDArray grad = parameters.get(fault.target).getArray().getGradient();
                            grad.attach(m);
                            grad.set(new NDIndex(0), fault.value);
                        }
                        if (fault == null) {
                            amp.step();
                        } else {
                            Map<String, String> before = state(model.getBlock(), config);
                            amp.step();
                            Map<String, String> after = state(model.getBlock(), config);
                            List<String> changed = new ArrayList<>();
                            for (String key : after.keySet()) {
                                if (!after.get(key).equals(before.get(key))) {
                                    changed.add(key);
                                }
                            }
                            assertTrue(
                                    changed.isEmpty(),
                                    "the skipped step " + step + " changed " + changed);
                        }
                    }
                    if (step % 100 == 99) {
                        assertAllFinite(model.getBlock(), step);
                    }
                }
                Outcome outcome = new Outcome();
                outcome.weights = weights(model.getBlock());
                outcome.optimizerState =
                        OptimizerSnapshot.of(
                                ((LossScalingOptimizer) config.getOptimizer()).getInner(),
                                model.getBlock());
                outcome.skipped = amp.getScaler().getSkippedSteps();
                outcome.accuracy = accuracy(trainer, new Random(99), centres);
                return outcome;
            }
        }
    }

    private static float accuracy(Trainer trainer, Random data, float[][] centres) {
        try (NDManager m = trainer.getManager().newSubManager()) {
            int correct = 0;
            for (int i = 0; i < 20; i++) {
                NDList xy = batch(m, data, centres);
                NDArray predicted = trainer.evaluate(new NDList(xy.get(0))).head().argMax(1);
                correct +=
                        predicted
                                .toType(DataType.FLOAT32, false)
                                .eq(xy.get(1))
                                .sum()
                                .toType(DataType.INT32, false)
                                .getInt();
            }
            return correct / (20f * BATCH);
        }
    }

    private static Map<String, float[]> weights(Block block) {
        Map<String, float[]> result = new TreeMap<>();
        for (Pair<String, Parameter> p : block.getParameters()) {
            result.put(p.getKey(), p.getValue().getArray().toFloatArray());
        }
        return result;
    }

    /** Weights and optimizer state as bits, to compare across one skipped step. */
    private static Map<String, String> state(Block block, AmpTrainingConfig config) {
        Map<String, String> state =
                new TreeMap<>(
                        OptimizerSnapshot.of(
                                ((LossScalingOptimizer) config.getOptimizer()).getInner(), block));
        for (Map.Entry<String, float[]> e : weights(block).entrySet()) {
            int[] bits = new int[e.getValue().length];
            for (int i = 0; i < bits.length; i++) {
                bits[i] = Float.floatToRawIntBits(e.getValue()[i]);
            }
            state.put(e.getKey(), Arrays.toString(bits));
        }
        return state;
    }

    private static void assertAllFinite(Block block, int step) {
        for (Map.Entry<String, float[]> e : weights(block).entrySet()) {
            for (float v : e.getValue()) {
                assertTrue(Float.isFinite(v), e.getKey() + " non-finite after step " + step);
            }
        }
    }

    private static Map<Integer, Fault> faults(int count, int parameterCount) {
        Random random = new Random(2024);
        Map<Integer, Fault> faults = new TreeMap<>();
        while (faults.size() < count) {
            int step = random.nextInt(STEPS);
            float value = FAULTS[random.nextInt(FAULTS.length)];
            int target = random.nextInt(parameterCount + 1) - 1;
            faults.put(step, new Fault(value, target));
        }
        return faults;
    }

    @Test
    void injectedFaultsAreSkippedAndLeaveNoTrace() {
        Map<Integer, Fault> faults = faults(25, 4);
        Outcome injected = train("float32", faults, false);
        Outcome never = train("float32", faults, true);
        assertEquals(faults.size(), injected.skipped, "one skipped step per injected fault");
        assertEquals(0, never.skipped);
        if (!sameEnd(never, injected)) {
            // Each skipped step was checked to change nothing; a different end can still come from
            // a machine that does not repeat a run. A third run tells the two apart.
            Outcome again = train("float32", faults, true);
            boolean reproducible = sameEnd(never, again);
            System.out.println(
                    "FaultInjectionTest: the run without faults "
                            + (reproducible ? "repeats" : "did not repeat")
                            + " bitwise in this JVM; the run with faults "
                            + (sameEnd(again, injected) ? "ends" : "does not end")
                            + " where its repetition ends");
            assumeTrue(
                    reproducible || sameEnd(again, injected),
                    "this machine does not repeat a run: the same 975 steps three times in one JVM"
                            + " ended at three different weights, so the end of the run with faults"
                            + " cannot be compared bitwise (its skipped steps were each checked to"
                            + " change nothing)");
            never = again;
        }
        for (String name : never.weights.keySet()) {
            assertArrayEquals(never.weights.get(name), injected.weights.get(name), name);
        }
        assertEquals(never.optimizerState, injected.optimizerState, "Adam state");
        assertEquals(never.accuracy, injected.accuracy);
        assertTrue(injected.accuracy > 0.9f, "accuracy " + injected.accuracy);
    }

    private static boolean sameEnd(Outcome a, Outcome b) {
        if (!a.weights.keySet().equals(b.weights.keySet())) {
            return false;
        }
        for (String name : a.weights.keySet()) {
            if (!Arrays.equals(a.weights.get(name), b.weights.get(name))) {
                return false;
            }
        }
        return a.optimizerState.equals(b.optimizerState) && a.accuracy == b.accuracy;
    }

    @Test
    void bfloat16RunSkipsEveryFaultAndStaysAccurate() {
        Map<Integer, Fault> faults = faults(25, 4);
        Outcome injected = train("mixed_bfloat16", faults, false);
        Outcome never = train("mixed_bfloat16", faults, true);
        assertEquals(faults.size(), injected.skipped);
        assertEquals(never.optimizerState.keySet(), injected.optimizerState.keySet());
        assertTrue(
                Math.abs(never.accuracy - injected.accuracy) <= 0.02f,
                never.accuracy + " vs " + injected.accuracy);
        assertTrue(injected.accuracy > 0.9f, "accuracy " + injected.accuracy);
    }
}
