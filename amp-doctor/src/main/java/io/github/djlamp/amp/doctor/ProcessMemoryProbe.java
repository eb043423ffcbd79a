package io.github.djlamp.amp.doctor;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;

/**
 * The resident set of this process under Linux, from {@code /proc/self/status}.
 *
 * <p>Where the kernel allows it, the high-water mark {@code VmHWM} is reset before each step by
 * writing {@code 5} to {@code /proc/self/clear_refs}, so the mark read after the step is the peak
 * of that step, short-lived activations included. Where it does not, {@code VmRSS} is sampled at
 * step boundaries, which misses memory freed within the step, and no growth is reported. The figure
 * is the whole process: the JVM, the engine's native library and the data, plus what the step
 * itself needs. {@link #release()} trims glibc's native heap.
 */
final class ProcessMemoryProbe implements MemoryProbe {

    private static final Path STATUS = Paths.get("/proc/self/status");
    private static final Path CLEAR_REFS = Paths.get("/proc/self/clear_refs");
    private static final byte[] RESET_HIGH_WATER_MARK = "5".getBytes(StandardCharsets.US_ASCII);

    private final boolean resettable;
    private long startRss = -1;
    private long peak = -1;
    private long lastGrowth = -1;

    ProcessMemoryProbe() {
        this.resettable = resetHighWaterMark();
    }

    /** Returns whether {@code /proc/self/status} can be read here. */
    static boolean isSupported() {
        try {
            return readStatus().rss > 0;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    /** Returns whether the high-water mark is reset before each step. */
    boolean isResettable() {
        return resettable;
    }

    /** Returns the resident set now, in bytes, or -1. */
    static long residentBytes() {
        return readOrNothing().rss;
    }

    @Override
    public void release() {
        NativeHeap.trim();
    }

    @Override
    public void stepStarted() {
        if (resettable) {
            resetHighWaterMark();
        }
        Status status = readOrNothing();
        startRss = status.rss;
        peak = Math.max(peak, status.rss);
    }

    @Override
    public void stepEnded() {
        Status status = readOrNothing();
        long stepPeak = resettable ? Math.max(status.hwm, status.rss) : status.rss;
        peak = Math.max(peak, stepPeak);
        lastGrowth = resettable && startRss > 0 && stepPeak > 0 ? stepPeak - startRss : -1;
    }

    @Override
    public long getPeakBytes() {
        return peak;
    }

    @Override
    public long getLastStepGrowthBytes() {
        return lastGrowth;
    }

    @Override
    public String describe() {
        String trim =
                NativeHeap.isTrimmable()
                        ? "; glibc's free native memory returned with malloc_trim before each run"
                                + " and each memory step"
                        : "; free native memory could not be returned (no glibc malloc_trim), so"
                                + " later runs may show memory of earlier ones";
        return (resettable
                        ? "process resident set, VmHWM reset before each step through"
                                + " /proc/self/clear_refs"
                        : "process resident set, VmRSS sampled at step boundaries (peaks within a"
                                + " step are missed)")
                + trim;
    }

    private static boolean resetHighWaterMark() {
        try {
            Files.write(CLEAR_REFS, RESET_HIGH_WATER_MARK);
            return true;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    private static Status readOrNothing() {
        try {
            return readStatus();
        } catch (IOException | RuntimeException e) {
            return new Status(-1, -1);
        }
    }

    private static Status readStatus() throws IOException {
        List<String> lines = Files.readAllLines(STATUS, StandardCharsets.US_ASCII);
        long rss = -1;
        long hwm = -1;
        for (String line : lines) {
            if (line.startsWith("VmRSS:")) {
                rss = kilobytes(line);
            } else if (line.startsWith("VmHWM:")) {
                hwm = kilobytes(line);
            }
        }
        return new Status(rss, hwm);
    }

    /** Parses a line such as {@code VmRSS:\t 508252 kB} into bytes. */
    static long kilobytes(String line) {
        String value = line.substring(line.indexOf(':') + 1).trim();
        int space = value.indexOf(' ');
        return Long.parseLong(space < 0 ? value : value.substring(0, space)) * 1024L;
    }

    private static final class Status {
        final long rss;
        final long hwm;

        Status(long rss, long hwm) {
            this.rss = rss;
            this.hwm = hwm;
        }
    }
}
