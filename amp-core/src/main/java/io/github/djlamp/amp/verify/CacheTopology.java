package io.github.djlamp.amp.verify;

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
 * zero. A CPU defect found there names this as its likely cause, and the fp32 passes of a kernel
 * check, which run shapes training may never run, run there without oneDNN ({@code
 * AmpBackend.referencePass}).
 */
public final class CacheTopology {

    /** Where the kernel lists cpu0's caches. */
    public static final Path CPU0_CACHE = Paths.get("/sys/devices/system/cpu/cpu0/cache");

    /**
     * Test aid: "hidden" or "visible" takes this machine for one that hides, or shows, its cache
     * topology, so that what djl-amp does on the other kind runs here too.
     */
    public static final String TEST_PROPERTY = "djlamp.test.cacheTopology";

    private CacheTopology() {}

    /**
     * Returns whether this machine hides its CPU cache topology ({@link #TEST_PROPERTY} decides
     * where it is set). Only Linux lists caches under {@code /sys}: elsewhere nothing is hidden.
     *
     * @return true where a Linux kernel lists no cache for cpu0
     */
    public static boolean isHidden() {
        String assumed = System.getProperty(TEST_PROPERTY);
        if (assumed != null) {
            return "hidden".equals(assumed);
        }
        return isHidden(System.getProperty("os.name", ""), CPU0_CACHE);
    }

    /**
     * Returns whether a machine running {@code osName} that lists cpu0's caches in {@code
     * cacheDirectory} hides its cache topology: a Linux one that lists none.
     *
     * @param osName the OS, as Java names it
     * @param cacheDirectory the directory the kernel lists cpu0's caches in
     * @return true where Linux lists no cache there
     */
    public static boolean isHidden(String osName, Path cacheDirectory) {
        return osName.startsWith("Linux") && !isVisible(cacheDirectory);
    }

    /**
     * Returns the sentence a report of CPU defects adds where {@code cacheDirectory} shows no
     * cache, else an empty string.
     *
     * @param cacheDirectory the directory the kernel lists cpu0's caches in
     * @return the sentence, starting with a space, or ""
     */
    public static String likelyCause(Path cacheDirectory) {
        if (isVisible(cacheDirectory)) {
            return "";
        }
        return " This machine hides its CPU cache topology (nothing under "
                + cacheDirectory
                + ", as under some hypervisors): oneDNN sizes its kernels' blocking from the cache"
                + " sizes, the likely cause.";
    }

    /**
     * Returns whether {@code cacheDirectory} lists any cache.
     *
     * @param cacheDirectory the directory the kernel lists cpu0's caches in
     * @return true where it has an entry
     */
    public static boolean isVisible(Path cacheDirectory) {
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
