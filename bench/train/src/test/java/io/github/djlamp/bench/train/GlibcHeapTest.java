package io.github.djlamp.bench.train;

import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.jna.Memory;
import org.junit.jupiter.api.Test;

/** The memory probes' counter follows what malloc hands out and takes back. */
class GlibcHeapTest {

    private static final long SIZE = 64L << 20;

    /**
     * The counter is the process's: the JVM's own threads (JIT, GC) malloc and free beside the
     * test, by a few hundred KiB (CI once saw 228 KiB freed less than the block).
     */
    private static final long OTHER_THREADS = 4L << 20;

    @Test
    void countsAMallocUntilItIsFreed() {
        assertTrue(GlibcHeap.available(), "this machine's glibc has mallinfo2");
        long before = GlibcHeap.inUseBytes();
        long held;
        try (Memory block = new Memory(SIZE)) {
            block.setByte(SIZE - 1, (byte) 1);
            held = GlibcHeap.inUseBytes();
        }
        long after = GlibcHeap.inUseBytes();
        assertTrue(held - before >= SIZE - OTHER_THREADS, "before " + before + ", held " + held);
        assertTrue(held - after >= SIZE - OTHER_THREADS, "held " + held + ", after " + after);
    }
}
