package io.github.djlamp.bench.train;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * This process's resident memory from {@code /proc/self/status} (Linux): everything resident,
 * native memory of the engine included, not just the Java heap.
 */
public final class ProcStatus {

    private static final Path STATUS = Paths.get("/proc/self/status");
    private static final Path CLEAR_REFS = Paths.get("/proc/self/clear_refs");

    private ProcStatus() {}

    /**
     * Returns the resident set size now.
     *
     * @return VmRSS in KiB
     */
    public static long rssKib() {
        return field(read(), "VmRSS");
    }

    /**
     * Returns the high-water mark of the resident set size since the process started or since the
     * last {@link #resetPeak()}.
     *
     * @return VmHWM in KiB
     */
    public static long peakKib() {
        return field(read(), "VmHWM");
    }

    /**
     * Resets the high-water mark to the current resident size (writes 5 to {@code
     * /proc/self/clear_refs}).
     *
     * @throws UncheckedIOException when the kernel refuses
     */
    public static void resetPeak() {
        try {
            Files.write(CLEAR_REFS, "5".getBytes(StandardCharsets.US_ASCII));
        } catch (IOException e) {
            throw new UncheckedIOException(
                    "Cannot reset the peak resident size through " + CLEAR_REFS, e);
        }
    }

    /**
     * Reads one {@code Name: value kB} line of a {@code /proc/PID/status} text.
     *
     * @param status the text of the file
     * @param name the field, e.g. {@code VmHWM}
     * @return the value in KiB
     * @throws IllegalArgumentException when the field is missing
     */
    public static long field(String status, String name) {
        for (String line : status.split("\n")) {
            if (line.startsWith(name + ":")) {
                String value = line.substring(name.length() + 1).trim();
                int space = value.indexOf(' ');
                return Long.parseLong(space < 0 ? value : value.substring(0, space));
            }
        }
        throw new IllegalArgumentException("No field " + name + " in the process status");
    }

    private static String read() {
        try {
            return Files.readString(STATUS, StandardCharsets.US_ASCII);
        } catch (IOException e) {
            throw new UncheckedIOException(
                    "Cannot read " + STATUS + ": memory is measured on Linux only", e);
        }
    }
}
