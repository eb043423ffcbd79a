package io.github.djlamp.amp.train;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * DJL's update count restored from an optimizer-state file lives on the device, where the fused
 * step increments it in place. It was a view of an array DJL builds over a Java buffer (on the CPU
 * libtorch uses such a buffer without a copy), and the buffer's own array was closed at once: after
 * a garbage collection the count read whatever reused the memory, and the fused step's increment
 * wrote into freed memory. CI saw it as "malloc_consolidate(): unaligned fastbin chunk detected"
 * and an aborted JVM in OptimizerStateResumeTest.
 */
class RestoredUpdateCountTest {

    @Test
    void aRestoredCountSurvivesAGarbageCollection() throws InterruptedException {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            FusedUpdateCount counter = new FusedUpdateCount(0);
            counter.restore(Map.of("w", 7L), 123_456_789L, manager, Device.cpu());
            List<ByteBuffer> reuse = new ArrayList<>();
            for (int round = 0; round < 3; round++) {
                System.gc();
                Thread.sleep(100); // direct buffers are freed by the cleaner's thread
                for (int i = 0; i < 20_000; i++) {
                    reuse.add(ByteBuffer.allocateDirect(8).putDouble(0, -1.0));
                }
            }
            assertEquals(123_456_789L, FusedUpdateCount.read(backend, counter.count()));
            reuse.clear();
        }
    }
}
