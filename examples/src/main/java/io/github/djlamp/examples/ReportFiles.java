package io.github.djlamp.examples;

import com.google.gson.GsonBuilder;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import io.github.djlamp.amp.doctor.DoctorReport;
import io.github.djlamp.amp.doctor.RunResult;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Writes a doctor's report as data, for people who plot it their own way: {@value #STEPS_CSV} (one
 * row per training step, columns per run), {@value #RUNS_CSV} (one row per run) and {@value
 * #REPORT_JSON} (everything, per-step lists included).
 */
public final class ReportFiles {

    /** Per-step values of every run: loss, loss scale, skipped flag, step time. */
    public static final String STEPS_CSV = "steps.csv";

    /** One row per run: throughput, speedup, memory, accuracy, loss scale, skipped steps. */
    public static final String RUNS_CSV = "runs.csv";

    /** The whole report and the settings it ran with. */
    public static final String REPORT_JSON = "report.json";

    private ReportFiles() {}

    /**
     * Writes the three files into {@code dir}, creating it if needed.
     *
     * @param report the report
     * @param settings what the run was asked to do (model, dataset, epochs...), for the JSON
     * @param dir the output folder
     * @return the files written
     * @throws IOException if a file cannot be written
     */
    public static List<Path> write(DoctorReport report, Map<String, Object> settings, Path dir)
            throws IOException {
        Files.createDirectories(dir);
        List<Path> written = new ArrayList<>();
        written.add(write(dir.resolve(STEPS_CSV), stepsCsv(report)));
        written.add(write(dir.resolve(RUNS_CSV), runsCsv(report)));
        written.add(write(dir.resolve(REPORT_JSON), json(report, settings)));
        return written;
    }

    /**
     * Formats the per-step CSV: a header, then one row per step with the step index, the epoch
     * (from 1) and, for each run, its loss, loss scale, whether the step was skipped (0 or 1) and
     * its wall time in milliseconds.
     *
     * @param report the report
     * @return the CSV text
     */
    public static String stepsCsv(DoctorReport report) {
        List<RunResult> runs = report.getRuns();
        StringBuilder sb = new StringBuilder("step,epoch");
        for (RunResult run : runs) {
            String k = run.getKey();
            sb.append(',').append(k).append("_loss");
            sb.append(',').append(k).append("_loss_scale");
            sb.append(',').append(k).append("_skipped");
            sb.append(',').append(k).append("_step_ms");
        }
        sb.append('\n');
        int steps = runs.stream().mapToInt(RunResult::getSteps).max().orElse(0);
        RunResult first = runs.get(0);
        int perEpoch = Math.max(1, first.getSteps() / Math.max(1, first.getEpochs()));
        List<Set<Integer>> skipped = new ArrayList<>();
        for (RunResult run : runs) {
            skipped.add(new HashSet<>(run.getSkippedSteps()));
        }
        for (int step = 0; step < steps; step++) {
            sb.append(step).append(',').append(step / perEpoch + 1);
            for (int r = 0; r < runs.size(); r++) {
                RunResult run = runs.get(r);
                if (step < run.getSteps()) {
                    sb.append(',').append(number(run.getLosses().get(step)));
                    sb.append(',').append(number(run.getLossScales().get(step)));
                    sb.append(',').append(skipped.get(r).contains(step) ? 1 : 0);
                    sb.append(',').append(fixed(run.getStepMillis().get(step), 3));
                } else {
                    sb.append(",,,,");
                }
            }
            sb.append('\n');
        }
        return sb.toString();
    }

    /**
     * Formats the per-run CSV: a header, then one row per run.
     *
     * @param report the report
     * @return the CSV text
     */
    public static String runsCsv(DoctorReport report) {
        StringBuilder sb =
                new StringBuilder(
                        "run,policy,precision,mixed_precision,images_per_second,speedup,median_step_ms,"
                                + "peak_memory_bytes,step_memory_bytes,test_accuracy,"
                                + "final_loss,loss_scaling,final_loss_scale,min_loss_scale,"
                                + "max_loss_scale,skipped_steps,steps,epochs,warmup_steps,"
                                + "train_seconds,eval_seconds\n");
        for (RunResult run : report.getRuns()) {
            List<Float> losses = run.getLosses();
            sb.append(
                            String.join(
                                    ",",
                                    run.getKey(),
                                    run.getPolicyName(),
                                    run.getPrecision().shortName(),
                                    Boolean.toString(run.isMixedPrecision()),
                                    fixed(run.getImagesPerSecond(), 2),
                                    fixed(report.speedup(run), 4),
                                    fixed(run.getMedianStepMillis(), 3),
                                    Long.toString(run.getPeakMemoryBytes()),
                                    Long.toString(run.getStepMemoryBytes()),
                                    number(run.getTestAccuracy()),
                                    losses.isEmpty() ? "" : number(losses.get(losses.size() - 1)),
                                    quote(run.getLossScaling()),
                                    number(run.getFinalLossScale()),
                                    number(run.getMinLossScale()),
                                    number(run.getMaxLossScale()),
                                    Integer.toString(run.getSkippedCount()),
                                    Integer.toString(run.getSteps()),
                                    Integer.toString(run.getEpochs()),
                                    Integer.toString(run.getWarmupSteps()),
                                    fixed(run.getTrainSeconds(), 3),
                                    fixed(run.getEvalSeconds(), 3)))
                    .append('\n');
        }
        return sb.toString();
    }

    /**
     * Formats the whole report as pretty-printed JSON; NaN becomes {@code null}.
     *
     * @param report the report
     * @param settings what the run was asked to do
     * @return the JSON text
     */
    public static String json(DoctorReport report, Map<String, Object> settings) {
        JsonObject root = new JsonObject();
        JsonObject set = new JsonObject();
        settings.forEach((k, v) -> set.add(k, value(v)));
        root.add("settings", set);
        root.addProperty("device", report.getDevice().toString());
        DeviceCapabilities caps = report.getCapabilities();
        if (caps != null) {
            root.addProperty("recommended", caps.getRecommended().shortName());
            root.addProperty("reason", caps.getReason());
        }
        root.addProperty("baseline", report.getBaseline().getKey());
        root.add("speedup", value(report.speedup()));
        JsonArray runs = new JsonArray();
        for (RunResult run : report.getRuns()) {
            JsonObject r = new JsonObject();
            r.addProperty("key", run.getKey());
            r.addProperty("label", run.getLabel());
            r.addProperty("policy", run.getPolicyName());
            r.addProperty("precision", run.getPrecision().shortName());
            r.addProperty("mixedPrecision", run.isMixedPrecision());
            r.add("imagesPerSecond", value(run.getImagesPerSecond()));
            r.add("speedup", value(report.speedup(run)));
            r.add("medianStepMillis", value(run.getMedianStepMillis()));
            r.addProperty("peakMemoryBytes", run.getPeakMemoryBytes());
            r.addProperty("stepMemoryBytes", run.getStepMemoryBytes());
            r.addProperty("memoryMethod", run.getMemoryMethod());
            r.add("testAccuracy", value(run.getTestAccuracy()));
            r.addProperty("lossScaling", run.getLossScaling());
            r.addProperty("skippedCount", run.getSkippedCount());
            r.addProperty("steps", run.getSteps());
            r.addProperty("epochs", run.getEpochs());
            r.addProperty("warmupSteps", run.getWarmupSteps());
            r.addProperty("imagesTrained", run.getImagesTrained());
            r.add("trainSeconds", value(run.getTrainSeconds()));
            r.add("evalSeconds", value(run.getEvalSeconds()));
            r.add("losses", array(run.getLosses()));
            r.add("lossScales", array(run.getLossScales()));
            r.add("skippedSteps", array(run.getSkippedSteps()));
            r.add("stepMillis", array(run.getStepMillis()));
            runs.add(r);
        }
        root.add("runs", runs);
        return new GsonBuilder().setPrettyPrinting().create().toJson(root) + "\n";
    }

    private static JsonArray array(List<? extends Number> numbers) {
        JsonArray array = new JsonArray(numbers.size());
        for (Number n : numbers) {
            array.add(value(n));
        }
        return array;
    }

    private static JsonElement value(Object v) {
        if (v == null) {
            return JsonNull.INSTANCE;
        }
        if (v instanceof Number) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                return JsonNull.INSTANCE;
            }
            return new JsonPrimitive((Number) v);
        }
        if (v instanceof Boolean) {
            return new JsonPrimitive((Boolean) v);
        }
        return new JsonPrimitive(v.toString());
    }

    private static String number(double value) {
        if (Double.isNaN(value) || Double.isInfinite(value)) {
            return "";
        }
        return Float.toString((float) value);
    }

    private static String fixed(double value, int decimals) {
        if (Double.isNaN(value) || Double.isInfinite(value)) {
            return "";
        }
        return String.format(Locale.ROOT, "%." + decimals + "f", value);
    }

    private static String quote(String text) {
        return '"' + text.replace("\"", "\"\"") + '"';
    }

    private static Path write(Path file, String text) throws IOException {
        Files.writeString(file, text, StandardCharsets.UTF_8);
        return file;
    }
}
