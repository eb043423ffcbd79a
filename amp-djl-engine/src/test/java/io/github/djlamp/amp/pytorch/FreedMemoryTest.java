package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * After a kernel check, what it made and freed goes back to the system: glibc keeps freed chunks
 * below its mmap threshold in its arenas, and the process's resident memory with them, until {@code
 * malloc_trim}. Measured on the process's resident set (/proc/self/status), Linux only.
 */
class FreedMemoryTest {

    private static long residentKib() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        throw new IllegalStateException("no VmRSS in /proc/self/status");
    }

    @Test
    void freedSmallArraysGoBackToTheSystem() throws IOException {
        if (!Files.exists(Path.of("/proc/self/status"))) {
            System.out.println("FreedMemoryTest: no /proc/self/status (not Linux): not measured");
            return;
        }
        PtAmpBackend backend = new PtAmpBackend();
        try (NDManager manager = NDManager.newBaseManager(Device.cpu(), "PyTorch")) {
            long before = residentKib();
            // 256 MiB in 64 KiB arrays: below glibc's mmap threshold, so from its arenas
            try (NDManager scratch = manager.newSubManager()) {
                List<NDArray> arrays = new ArrayList<>();
                for (int i = 0; i < 4096; i++) {
                    arrays.add(scratch.ones(new Shape(16 * 1024)));
                }
            }
            long freed = residentKib();
            if (freed - before < 128 * 1024) {
                System.out.printf(
                        "FreedMemoryTest: the allocator here gave the 256 MiB back as they were freed"
                                + " (resident KiB %d before, %d after): nothing kept to release,"
                                + " not measured%n",
                        before, freed);
                return;
            }
            backend.releaseFreedMemory(Device.cpu());
            long trimmed = residentKib();
            System.out.printf(
                    "resident KiB: %d before, %d after freeing 256 MiB, %d after the release%n",
                    before, freed, trimmed);
            assertTrue(
                    freed - trimmed > 128 * 1024,
                    "the release gives back most of the 256 MiB freed: "
                            + freed
                            + " -> "
                            + trimmed
                            + " KiB");
        }
    }
}
