package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.GradientCollector;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import org.junit.jupiter.api.Test;

class GradientThroughCastTest {

    /** d/dw sum((x @ w)^2) computed in fp32, and the same with x and w cast to {@code low}. */
    private static void assertGradientMatches(Precision low, float tolerance) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            Engine.getInstance().setRandomSeed(7);
            NDArray x = manager.randomNormal(new Shape(8, 16));
            NDArray w = manager.randomNormal(new Shape(16, 4)).mul(0.1f);
            w.setRequiresGradient(true);

            float[] reference;
            try (GradientCollector collector = Engine.getInstance().newGradientCollector()) {
                NDArray y = x.matMul(w);
                collector.backward(y.mul(y).sum());
            }
            reference = w.getGradient().toFloatArray();

            NDArray master = w.duplicate(); // gradients accumulate in DJL: use a fresh master
            master.setRequiresGradient(true);
            try (NDManager step = manager.newSubManager();
                    GradientCollector collector = Engine.getInstance().newGradientCollector()) {
                NDArray xLow = backend.cast(x, low, step);
                NDArray wLow = backend.cast(master, low, step);
                NDArray y = backend.cast(xLow.matMul(wLow), Precision.FP32, step);
                collector.backward(y.mul(y).sum());
            }
            NDArray grad = master.getGradient();
            assertEquals(Precision.FP32, backend.precisionOf(grad), "master gradient dtype");
            float[] actual = grad.toFloatArray();
            float scale = 0;
            for (float v : reference) {
                scale = Math.max(scale, Math.abs(v));
            }
            for (int i = 0; i < reference.length; i++) {
                assertEquals(reference[i], actual[i], tolerance * scale, "element " + i);
            }
        }
    }

    @Test
    void bfloat16CastIsDifferentiable() {
        assertGradientMatches(Precision.BF16, 0.03f);
    }

    @Test
    void float16CastIsDifferentiable() {
        assertGradientMatches(Precision.FP16, 0.005f);
    }
}
