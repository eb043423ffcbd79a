package io.github.djlamp.bench.train;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * How busy the machine is around a measurement: the load averages, and how many cores other
 * processes kept busy while it ran (the load average counts the benchmark's own threads too).
 */
final class Load {

    private final long startNanos;
    private final long startBusyTicks;
    private final long startOwnTicks;

    private Load() {
        startNanos = System.nanoTime();
        startBusyTicks = machineBusyTicks(read(Paths.get("/proc/stat")));
        startOwnTicks = processTicks(read(Paths.get("/proc/self/stat")));
    }

    /** Starts counting the CPU time of other processes. */
    static Load start() {
        return new Load();
    }

    /**
     * Returns the average number of cores that processes other than this one kept busy since {@link
     * #start()} (USER_HZ ticks of /proc/stat minus this process's, over the wall time).
     */
    double otherCores() {
        double seconds = (System.nanoTime() - startNanos) / 1e9;
        long busy = machineBusyTicks(read(Paths.get("/proc/stat"))) - startBusyTicks;
        long own = processTicks(read(Paths.get("/proc/self/stat"))) - startOwnTicks;
        return Math.max(0, (busy - own) / 100.0 / seconds);
    }

    /** Returns the 1, 5 and 15 minute load averages, e.g. {@code "0.41 0.80 1.02"}. */
    static String averages() {
        try {
            String[] parts = read(Paths.get("/proc/loadavg")).trim().split("\\s+");
            return parts[0] + " " + parts[1] + " " + parts[2];
        } catch (RuntimeException e) {
            return "unknown";
        }
    }

    /**
     * Busy ticks of all CPUs from the first line of /proc/stat (everything but idle and iowait).
     */
    static long machineBusyTicks(String procStat) {
        String[] f = procStat.substring(0, procStat.indexOf('\n')).trim().split("\\s+");
        if (!"cpu".equals(f[0])) {
            throw new IllegalArgumentException("/proc/stat does not start with the cpu line");
        }
        // user nice system idle iowait irq softirq steal
        long busy = 0;
        for (int i : new int[] {1, 2, 3, 6, 7, 8}) {
            busy += Long.parseLong(f[i]);
        }
        return busy;
    }

    /** User plus system ticks of a process from its /proc/PID/stat line (fields 14 and 15). */
    static long processTicks(String pidStat) {
        String[] f = pidStat.substring(pidStat.lastIndexOf(')') + 2).trim().split("\\s+");
        // f[0] is field 3 (state): utime is field 14, stime field 15
        return Long.parseLong(f[11]) + Long.parseLong(f[12]);
    }

    private static String read(Path path) {
        try {
            return Files.readString(path, StandardCharsets.US_ASCII);
        } catch (IOException e) {
            throw new UncheckedIOException("Cannot read " + path, e);
        }
    }
}
