package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.GradientCollector;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import org.junit.jupiter.api.Test;

/**
 * Whether autograd tracks an array, as the kernel check and checkpointing ask it: DJL's own answer
 * ({@code hasGradient()}) is false for the result of a recorded operation on a leaf here, so the
 * kernel check would skip every layer's input gradient; the engine layer's answer is PyTorch's.
 */
class RequiresGradientTest {

    @Test
    void recordedResultsOfALeafAreTrackedWhereDjlSaysTheyAreNot() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch");
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            AmpBackend backend = AmpBackends.forManager(manager);
            NDArray leaf = manager.ones(new Shape(2, 3));
            leaf.setRequiresGradient(true);
            NDArray product = leaf.mul(2f);
            NDArray cast = backend.cast(product, Precision.FP16, MemoryLayout.PRESERVE, manager);
            NDArray constant = manager.ones(new Shape(2, 3)).mul(2f);

            assertTrue(backend.requiresGradient(leaf));
            assertTrue(backend.requiresGradient(product), "an operation on a leaf");
            assertTrue(backend.requiresGradient(cast), "a differentiable cast of it");
            assertFalse(backend.requiresGradient(constant), "an operation on untracked arrays");
            // the quirk this works around; if DJL fixes it, the TorchScript call can go
            assertFalse(
                    product.hasGradient(),
                    "DJL's hasGradient() now answers true for a recorded result");
        }
    }
}
