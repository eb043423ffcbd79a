package io.github.djlamp.bench.train;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;

/** The machine's load averages, recorded next to every measurement. */
final class Load {

    private Load() {}

    /** Returns the 1, 5 and 15 minute load averages, e.g. {@code "0.41 0.80 1.02"}. */
    static String averages() {
        try {
            String[] parts =
                    Files.readString(Paths.get("/proc/loadavg"), StandardCharsets.US_ASCII)
                            .trim()
                            .split("\\s+");
            return parts[0] + " " + parts[1] + " " + parts[2];
        } catch (IOException | RuntimeException e) {
            return "unknown";
        }
    }
}
