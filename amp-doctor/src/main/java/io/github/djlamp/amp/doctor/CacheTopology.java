package io.github.djlamp.amp.doctor;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.stream.Stream;

/**
 * Whether the kernel shows the CPU's cache topology. Some hypervisors hide it (no entries under
 * {@code /sys/devices/system/cpu/cpu0/cache}, {@code lscpu} lists no caches); oneDNN sizes its
 * blocking from the cache sizes it reads, and on such a machine (AMD EPYC family 26 under
 * Firecracker, issue 43) its AVX-512 kernels computed wrong and a convolution's backward divided by
 * zero. A CPU defect found there names this as its likely cause.
 */
final class CacheTopology {

    static final Path CPU0_CACHE = Paths.get("/sys/devices/system/cpu/cpu0/cache");

    private CacheTopology() {}

    /**
     * Returns the sentence a report of CPU defects adds where {@code cacheDirectory} shows no
     * cache, else an empty string.
     *
     * @param cacheDirectory the directory the kernel lists cpu0's caches in
     * @return the sentence, starting with a space, or ""
     */
    static String likelyCause(Path cacheDirectory) {
        if (isVisible(cacheDirectory)) {
            return "";
        }
        return " This machine hides its CPU cache topology (nothing under "
                + cacheDirectory
                + ", as under some hypervisors): oneDNN sizes its kernels' blocking from the cache"
                + " sizes, the likely cause.";
    }

    static boolean isVisible(Path cacheDirectory) {
        if (!Files.isDirectory(cacheDirectory)) {
            return false;
        }
        try (Stream<Path> entries = Files.list(cacheDirectory)) {
            return entries.findAny().isPresent();
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }
}
