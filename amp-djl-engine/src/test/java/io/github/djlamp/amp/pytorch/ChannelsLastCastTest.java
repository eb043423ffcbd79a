package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.convolutional.Conv2d;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import org.junit.jupiter.api.Test;

class ChannelsLastCastTest {

    @Test
    void channelsLastKeepsLogicalValuesAndContiguousReadsBackInOrder() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            NDArray x = manager.arange(120f).reshape(2, 3, 4, 5);
            NDArray nhwc = backend.cast(x, Precision.BF16, MemoryLayout.CHANNELS_LAST, manager);
            assertEquals(new Shape(2, 3, 4, 5), nhwc.getShape());
            NDArray back = backend.cast(nhwc, Precision.FP32, MemoryLayout.CONTIGUOUS, manager);
            assertArrayEquals(x.toFloatArray(), back.toFloatArray());
        }
    }

    @Test
    void otherRanksIgnoreChannelsLast() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            NDArray x = manager.arange(6f).reshape(2, 3);
            NDArray low = backend.cast(x, Precision.FP16, MemoryLayout.CHANNELS_LAST, manager);
            assertArrayEquals(
                    x.toFloatArray(),
                    backend.cast(low, Precision.FP32, MemoryLayout.CONTIGUOUS, manager)
                            .toFloatArray());
        }
    }

    @Test
    void convolutionOnChannelsLastMatchesContiguous() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            Engine.getInstance().setRandomSeed(5);
            NDArray x = manager.randomNormal(new Shape(2, 3, 8, 8));
            NDArray w = manager.randomNormal(new Shape(8, 3, 3, 3));
            NDArray expected = convolve(backend, x, w, MemoryLayout.PRESERVE, manager);
            NDArray actual = convolve(backend, x, w, MemoryLayout.CHANNELS_LAST, manager);
            assertArrayEquals(expected.toFloatArray(), actual.toFloatArray(), 0.05f);
        }
    }

    private static NDArray convolve(
            AmpBackend backend, NDArray x, NDArray w, MemoryLayout layout, NDManager manager) {
        NDArray y =
                Conv2d.conv2d(
                                backend.cast(x, Precision.BF16, layout, manager),
                                backend.cast(w, Precision.BF16, layout, manager),
                                null,
                                new Shape(1, 1),
                                new Shape(1, 1),
                                new Shape(1, 1),
                                1)
                        .singletonOrThrow();
        return backend.cast(y, Precision.FP32, MemoryLayout.CONTIGUOUS, manager);
    }
}
