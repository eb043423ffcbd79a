package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
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
}
