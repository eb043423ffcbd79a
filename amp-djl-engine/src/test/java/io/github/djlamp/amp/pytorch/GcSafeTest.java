package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.GradientCollector;
import ai.djl.training.loss.Loss;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * The tests' GC-safe arithmetic computes what DJL's does, bit for bit, and a garbage collection
 * between forward and backward changes no gradient through it (through DJL's {@code mul(Number)} it
 * does: README, "DJL defects djl-amp cannot fix").
 */
class GcSafeTest {

    @Test
    void theL2LossIsDjlsBitForBit() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(11);
            NDArray prediction = manager.randomNormal(new Shape(4, 3));
            NDArray label = manager.randomNormal(new Shape(12));
            Loss djl = Loss.l2Loss();
            Loss safe = GcSafe.l2Loss();
            assertEquals(djl.getName(), safe.getName());
            float[] expected = lossAndGradient(prediction, p -> evaluate(djl, label, p), () -> {});
            float[] actual = lossAndGradient(prediction, p -> evaluate(safe, label, p), () -> {});
            assertArrayEquals(expected, actual);
        }
    }

    @Test
    void aCollectionBetweenForwardAndBackwardChangesNoGradient() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(12);
            NDArray prediction = manager.randomNormal(new Shape(4, 3));
            NDArray label = manager.randomNormal(new Shape(4, 3));
            Loss loss = GcSafe.l2Loss();
            Function<NDArray, NDArray> l2 = p -> evaluate(loss, label, p);
            Function<NDArray, NDArray> inf = p -> GcSafe.mul(p, Float.POSITIVE_INFINITY).sum();
            float[] undisturbed = lossAndGradient(prediction, l2, () -> {});
            float[] infinite = lossAndGradient(prediction, inf, () -> {});
            // several runs: the first collection of a JVM leaves other garbage than later ones
            for (int run = 0; run < 3; run++) {
                assertArrayEquals(
                        undisturbed,
                        lossAndGradient(prediction, l2, GcSafe::collectGarbage),
                        "L2 loss, run " + run);
                assertArrayEquals(
                        infinite,
                        lossAndGradient(prediction, inf, GcSafe::collectGarbage),
                        "an injected Inf, run " + run);
            }
            assertEquals(Float.POSITIVE_INFINITY, infinite[1], "the injected Inf reaches backward");
        }
    }

    private static NDArray evaluate(Loss loss, NDArray label, NDArray prediction) {
        return loss.evaluate(new NDList(label), new NDList(prediction));
    }

    /** The loss, then the gradient of the loss with respect to the prediction. */
    private static float[] lossAndGradient(
            NDArray prediction, Function<NDArray, NDArray> loss, Runnable beforeBackward) {
        try (NDManager step = prediction.getManager().newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            NDArray leaf = prediction.duplicate();
            leaf.attach(step);
            leaf.setRequiresGradient(true);
            NDArray value = loss.apply(leaf);
            beforeBackward.run();
            collector.backward(value);
            float[] gradient = leaf.getGradient().toFloatArray();
            float[] result = new float[gradient.length + 1];
            result[0] = value.getFloat();
            System.arraycopy(gradient, 0, result, 1, gradient.length);
            return result;
        }
    }
}
