package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.GradientCollector;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code AmpBackend.backwardTo}, the checkpointing recomputation's backward: the inputs' gradients
 * come back (null for an input the graph does not reach) and are put into no leaf, the parameters'
 * are added into their gradients as backward adds them, and every name is put back.
 */
class BackwardToTest {

    @Test
    void returnsTheInputGradientsAndAddsIntoTheParameters() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch");
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            AmpBackend backend = AmpBackends.forManager(manager);
            NDArray input =
                    backend.cast(
                            manager.arange(8f).reshape(1, 2, 2, 2),
                            Precision.FP32,
                            MemoryLayout.CHANNELS_LAST,
                            manager);
            input.setRequiresGradient(true);
            NDArray unused = manager.ones(new Shape(2));
            unused.setRequiresGradient(true);
            NDArray weight = manager.full(new Shape(1, 2, 2, 2), 3f);
            weight.setRequiresGradient(true);
            weight.setName("weight");
            NDArray cast = backend.cast(input, Precision.FP32, MemoryLayout.CONTIGUOUS, manager);
            NDArray output = cast.mul(weight);
            NDArray cotangent = manager.full(new Shape(1, 2, 2, 2), 0.5f);

            List<NDArray> found =
                    backend.backwardTo(
                            new NDList(output),
                            new NDList(cotangent),
                            new NDList(input, unused),
                            new NDList(weight),
                            manager);

            assertEquals(2, found.size());
            float[] expected = new float[8];
            java.util.Arrays.fill(expected, 1.5f);
            assertArrayEquals(expected, found.get(0).toFloatArray(), "0.5 x the weight 3");
            assertNull(found.get(1), "the graph does not reach it");
            assertArrayEquals(
                    new float[8],
                    input.getGradient().toFloatArray(),
                    "nothing put into the input leaf's gradient");
            float[] halfInput = new float[8];
            for (int i = 0; i < 8; i++) {
                halfInput[i] = 0.5f * i;
            }
            assertArrayEquals(halfInput, weight.getGradient().toFloatArray(), "added");
            assertEquals("weight", weight.getName(), "the name put back");
        }
    }
}
