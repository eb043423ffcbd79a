package io.github.djlamp.amp.doctor;

import ai.djl.Device;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;

/**
 * What the {@link AmpDoctor} found: one {@link RunResult} per precision, the baseline, the speedup,
 * and a side-by-side table.
 */
public final class DoctorReport {

    private static final double MIB = 1024.0 * 1024.0;

    private final List<RunResult> runs;
    private final Device device;
    private final DeviceCapabilities capabilities;
    private final PlatformReport platform;

    /**
     * Creates a report without a platform check.
     *
     * @param runs the runs, in the order they ran; at least one
     * @param device the device they trained on
     * @param capabilities what djl-amp knows of the device, or null when no backend was found
     * @throws IllegalArgumentException when there is no run
     */
    public DoctorReport(List<RunResult> runs, Device device, DeviceCapabilities capabilities) {
        this(runs, device, capabilities, null);
    }

    /**
     * Creates a report.
     *
     * @param runs the runs, in the order they ran; at least one
     * @param device the device they trained on
     * @param capabilities what djl-amp knows of the device, or null when no backend was found
     * @param platform what the {@link PlatformCheck} found, or null when it did not run
     * @throws IllegalArgumentException when there is no run
     */
    public DoctorReport(
            List<RunResult> runs,
            Device device,
            DeviceCapabilities capabilities,
            PlatformReport platform) {
        if (runs.isEmpty()) {
            throw new IllegalArgumentException("A doctor's report needs at least one run");
        }
        this.runs = Collections.unmodifiableList(new ArrayList<>(runs));
        this.device = device;
        this.capabilities = capabilities;
        this.platform = platform;
    }

    /**
     * Returns the runs, in the order they ran.
     *
     * @return the runs
     */
    public List<RunResult> getRuns() {
        return runs;
    }

    /**
     * Returns the device the runs trained on.
     *
     * @return the device
     */
    public Device getDevice() {
        return device;
    }

    /**
     * Returns what djl-amp knows of the device: the recommended precision and why.
     *
     * @return the capabilities, or null when no djl-amp backend serves the engine
     */
    public DeviceCapabilities getCapabilities() {
        return capabilities;
    }

    /**
     * Returns what the {@link PlatformCheck} found before the runs: whether this machine's kernels
     * compute right, and the cure where they do not.
     *
     * @return the platform report, or null when the check did not run
     */
    public PlatformReport getPlatformReport() {
        return platform;
    }

    /**
     * Returns the baseline the speedups are relative to: the first run through plain DJL in fp32,
     * else the first run.
     *
     * @return the baseline run
     */
    public RunResult getBaseline() {
        for (RunResult run : runs) {
            if (!run.isMixedPrecision() && run.getPrecision() == Precision.FP32) {
                return run;
            }
        }
        return runs.get(0);
    }

    /**
     * Returns the speedup of a run: its images per second over the baseline's.
     *
     * @param run one of this report's runs
     * @return the ratio, 1 for the baseline itself
     */
    public double speedup(RunResult run) {
        double base = getBaseline().getImagesPerSecond();
        return base > 0 ? run.getImagesPerSecond() / base : Double.NaN;
    }

    /**
     * Returns the speedup of mixed precision: of the first run that is not the baseline, over the
     * baseline.
     *
     * @return the ratio; 1 when the report holds only the baseline
     */
    public double speedup() {
        RunResult baseline = getBaseline();
        for (RunResult run : runs) {
            if (run != baseline) {
                return speedup(run);
            }
        }
        return 1.0;
    }

    /**
     * Formats the runs side by side, one column per run, one row per measurement, with a note on
     * the device, the platform check (one line when sound; the defects, the cure and the advice
     * otherwise) and how memory was measured.
     *
     * @return a multi-line plain-text table
     */
    public String toTable() {
        List<String[]> rows = new ArrayList<>();
        rows.add(header());
        rows.add(row("images/s (after warm-up)", r -> format("%.1f", r.getImagesPerSecond())));
        rows.add(row("speedup", r -> format("%.2fx", speedup(r))));
        rows.add(row("median step, ms", r -> format("%.1f", r.getMedianStepMillis())));
        rows.add(row("peak memory of a step, MiB", r -> mib(r.getStepMemoryBytes())));
        rows.add(
                row(
                        device != null && device.isGpu()
                                ? "peak device memory, MiB"
                                : "peak process memory, MiB",
                        r -> mib(r.getPeakMemoryBytes())));
        rows.add(
                row(
                        "final test accuracy",
                        r ->
                                Double.isNaN(r.getTestAccuracy())
                                        ? "-"
                                        : format("%.2f%%", 100 * r.getTestAccuracy())));
        rows.add(row("final training loss", r -> format("%.4f", lastLoss(r))));
        rows.add(row("loss scale", DoctorReport::scaleSummary));
        rows.add(row("skipped steps", r -> r.getSkippedCount() + " of " + r.getSteps()));
        rows.add(row("16-bit kernel checks", RunResult::describeKernelChecks));
        rows.add(row("training time, s", r -> format("%.1f", r.getTrainSeconds())));
        StringBuilder sb = new StringBuilder();
        appendAligned(sb, rows);
        sb.append("Device: ").append(device);
        if (capabilities != null) {
            sb.append("; djl-amp recommends ")
                    .append(capabilities.getRecommended().shortName())
                    .append(": ")
                    .append(capabilities.getReason());
        }
        sb.append('\n');
        if (platform != null) {
            sb.append(platform).append('\n');
        }
        sb.append("Memory: ")
                .append(runs.get(0).getMemoryMethod())
                .append(". Peak memory of a step: what a training step adds at its peak to the")
                .append(" memory in use before it (largest of ")
                .append(AmpDoctor.MEMORY_STEPS)
                .append(" steps after the evaluation).\n");
        return sb.toString();
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return toTable();
    }

    private String[] header() {
        String[] cells = new String[runs.size() + 1];
        cells[0] = "";
        for (int i = 0; i < runs.size(); i++) {
            RunResult run = runs.get(i);
            cells[i + 1] = run.getLabel() + (run.isMixedPrecision() ? "" : ", plain DJL");
        }
        return cells;
    }

    private String[] row(String name, Function<RunResult, String> cell) {
        String[] cells = new String[runs.size() + 1];
        cells[0] = name;
        for (int i = 0; i < runs.size(); i++) {
            cells[i + 1] = cell.apply(runs.get(i));
        }
        return cells;
    }

    private static void appendAligned(StringBuilder sb, List<String[]> rows) {
        int columns = rows.get(0).length;
        int[] widths = new int[columns];
        for (String[] row : rows) {
            for (int c = 0; c < columns; c++) {
                widths[c] = Math.max(widths[c], row[c].length());
            }
        }
        for (int r = 0; r < rows.size(); r++) {
            String[] row = rows.get(r);
            StringBuilder line = new StringBuilder();
            for (int c = 0; c < columns; c++) {
                if (c == 0) {
                    line.append(String.format(Locale.ROOT, "%-" + widths[c] + "s", row[c]));
                } else {
                    line.append(" | ");
                    line.append(String.format(Locale.ROOT, "%" + widths[c] + "s", row[c]));
                }
            }
            sb.append(line.toString().stripTrailing()).append('\n');
            if (r == 0) {
                int total = line.length();
                sb.append("-".repeat(total)).append('\n');
            }
        }
    }

    private static String scaleSummary(RunResult run) {
        if (!run.isLossScaled()) {
            return "none";
        }
        String fin = DoctorRun.formatScale(run.getFinalLossScale());
        String min = DoctorRun.formatScale(run.getMinLossScale());
        String max = DoctorRun.formatScale(run.getMaxLossScale());
        return min.equals(max) ? fin : fin + " (" + min + " to " + max + ")";
    }

    private static float lastLoss(RunResult run) {
        List<Float> losses = run.getLosses();
        return losses.isEmpty() ? Float.NaN : losses.get(losses.size() - 1);
    }

    private static String mib(long bytes) {
        return bytes < 0 ? "n/a" : format("%.0f", bytes / MIB);
    }

    private static String format(String pattern, Object... args) {
        return String.format(Locale.ROOT, pattern, args);
    }
}
