package io.github.djlamp.bench;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * Rewrites the micro-benchmark section of {@code bench/RESULTS.md}, between {@value #BEGIN} and
 * {@value #END}, from a JMH JSON result file. The rest of the file is left as it is; the section is
 * appended when the markers are missing.
 */
public final class MicroResults {

    /** The line that opens the section. */
    public static final String BEGIN = "<!-- micro:begin -->";

    /** The line that closes the section. */
    public static final String END = "<!-- micro:end -->";

    /** Pairs compared in the ratio lines: {candidate, reference}, both Class.method. */
    private static final String[][] RATIOS = {
        {"CastBenchmark.ampFp32ToFp16", "CastBenchmark.djlFp32ToFp16"},
        {"CastBenchmark.ampFp16ToFp32", "CastBenchmark.djlFp16ToFp32"},
        {"UnscaleBenchmark.naiveLoop", "UnscaleBenchmark.fused"},
    };

    private MicroResults() {}

    /**
     * Writes the section.
     *
     * @param args the JMH JSON file, the Markdown file, then the command that ran the benchmarks,
     *     the date, the machine (cores, CPU model, {@code java -version}) and the load averages
     *     before and after the run
     * @throws IOException when a file cannot be read or written
     */
    public static void main(String[] args) throws IOException {
        if (args.length != 6) {
            System.err.println(
                    "usage: MicroResults RESULT.json RESULTS.md COMMAND DATE MACHINE LOAD");
            System.exit(2);
        }
        JsonArray results =
                JsonParser.parseString(Files.readString(Path.of(args[0]))).getAsJsonArray();
        String section = section(results, args[2], args[3], args[4], args[5]).stripTrailing();
        Path markdown = Path.of(args[1]);
        String old =
                Files.exists(markdown)
                        ? Files.readString(markdown)
                        : "# djl-amp benchmark results\n";
        Files.writeString(markdown, replaceSection(old, section), StandardCharsets.UTF_8);
    }

    /**
     * Puts {@code section} between the markers of {@code document}, or appends it with markers.
     *
     * @param document the whole Markdown file
     * @param section the new content, without markers
     * @return the new file
     */
    public static String replaceSection(String document, String section) {
        int begin = document.indexOf(BEGIN);
        int end = document.indexOf(END);
        String block = BEGIN + "\n" + section + "\n" + END;
        if (begin < 0 || end < begin) {
            return document.stripTrailing() + "\n\n" + block + "\n";
        }
        return document.substring(0, begin) + block + document.substring(end + END.length());
    }

    private static String section(
            JsonArray results, String command, String date, String machine, String load) {
        StringBuilder out = new StringBuilder();
        out.append("## Micro-benchmarks: the engine layer (JMH)\n\n");
        out.append("- Command: `").append(command).append("`\n");
        out.append("- Date: ").append(date).append('\n');
        out.append("- Machine: ").append(machine).append('\n');
        out.append("- Load average (1 min): ").append(load);
        out.append(" (the run itself adds about 1; more means other processes shared the cores)\n");
        if (!results.isEmpty()) {
            JsonObject first = results.get(0).getAsJsonObject();
            out.append("- JMH ").append(text(first, "jmhVersion")).append(", ");
            out.append(text(first, "mode")).append(", forks ").append(text(first, "forks"));
            out.append(", warmup ").append(text(first, "warmupIterations")).append(" x ");
            out.append(text(first, "warmupTime")).append(", measurement ");
            out.append(text(first, "measurementIterations")).append(" x ");
            out.append(text(first, "measurementTime"));
            out.append("; error is JMH's 99.9% confidence half-width\n");
            out.append("- Forked JVM arguments: `").append(jvmArgs(first)).append("`\n");
        }
        out.append("\n| benchmark | params | score | error | unit |\n");
        out.append("| --- | --- | ---: | ---: | --- |\n");
        Map<String, Double> scores = new LinkedHashMap<>();
        for (JsonElement element : results) {
            JsonObject result = element.getAsJsonObject();
            String name = shortName(result.get("benchmark").getAsString());
            String params = params(result);
            JsonObject metric = result.getAsJsonObject("primaryMetric");
            double score = metric.get("score").getAsDouble();
            double error = number(metric.get("scoreError"));
            scores.put(name + "|" + params, score);
            out.append("| ").append(name).append(" | ").append(params).append(" | ");
            out.append(format(score)).append(" | ± ").append(format(error)).append(" | ");
            out.append(metric.get("scoreUnit").getAsString()).append(" |\n");
        }
        out.append(ratios(scores));
        return out.toString();
    }

    private static String ratios(Map<String, Double> scores) {
        StringBuilder out = new StringBuilder();
        for (String[] pair : RATIOS) {
            for (Map.Entry<String, Double> entry : scores.entrySet()) {
                String[] key = entry.getKey().split("\\|", 2);
                Double reference = scores.get(pair[1] + "|" + key[1]);
                if (key[0].equals(pair[0]) && reference != null) {
                    out.append(
                            String.format(Locale.ROOT, "- %s / %s, %s", pair[0], pair[1], key[1]));
                    out.append(
                            String.format(Locale.ROOT, ": %.2fx%n", entry.getValue() / reference));
                }
            }
        }
        return out.length() == 0 ? "" : "\nRatios of the scores (time per call):\n\n" + out;
    }

    private static String shortName(String benchmark) {
        String[] parts = benchmark.split("\\.");
        return parts.length < 2
                ? benchmark
                : parts[parts.length - 2] + "." + parts[parts.length - 1];
    }

    private static String params(JsonObject result) {
        JsonObject params = result.getAsJsonObject("params");
        if (params == null) {
            return "";
        }
        List<String> pairs =
                params.entrySet().stream()
                        .map(e -> e.getKey() + "=" + e.getValue().getAsString())
                        .collect(Collectors.toList());
        return String.join(", ", pairs);
    }

    private static String jvmArgs(JsonObject result) {
        JsonArray args = result.getAsJsonArray("jvmArgs");
        List<String> list = new ArrayList<>();
        if (args != null) {
            args.forEach(arg -> list.add(arg.getAsString()));
        }
        return String.join(" ", list);
    }

    private static String text(JsonObject object, String member) {
        JsonElement value = object.get(member);
        return value == null || value.isJsonNull() ? "?" : value.getAsString();
    }

    private static double number(JsonElement value) {
        if (value == null || value.isJsonNull()) {
            return Double.NaN;
        }
        String text = value.getAsString();
        return "NaN".equals(text) ? Double.NaN : Double.parseDouble(text);
    }

    private static String format(double value) {
        if (Double.isNaN(value)) {
            return "n/a";
        }
        double magnitude = Math.abs(value);
        String pattern = magnitude >= 100 ? "%.0f" : magnitude >= 10 ? "%.1f" : "%.2f";
        return String.format(Locale.ROOT, pattern, value);
    }
}
