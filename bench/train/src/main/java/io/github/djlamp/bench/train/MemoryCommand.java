package io.github.djlamp.bench.train;

import com.google.gson.GsonBuilder;
import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Peak memory of training steps, each configuration in a JVM of its own (the cleanest way to
 * separate them: no allocator caches or high-water marks carried over), then the largest batch
 * whose process peak stays under a fixed cap, found by doubling and bisection.
 */
@Command(
        name = "memory",
        description = "Step memory per batch size and variant, and the largest batch under a cap.")
final class MemoryCommand implements Callable<Integer> {

    @Option(
            names = "--network",
            defaultValue = "resnet18",
            description = "resnet18, resnet50, resnet50-224, transformer or transformer-256")
    String network;

    @Option(names = "--batches", defaultValue = "64,128,256", description = "Batch sizes.")
    String batches;

    @Option(
            names = "--variants",
            defaultValue = "djl-fp32,djl-amp-bf16,djl-amp-bf16-nchw",
            description = "Variants measured at every batch size.")
    String variants;

    @Option(
            names = "--repeat",
            defaultValue = "2",
            description = "Measurements of every batch size and variant (alternating).")
    int repeat;

    @Option(
            names = "--cap-mib",
            defaultValue = "2048",
            description = "The memory cap (process peak RSS, MiB); 0 skips the search.")
    long capMib;

    @Option(
            names = "--cap-on",
            defaultValue = "process",
            description =
                    "What the cap bounds: process (the whole process's peak over the warm-up and"
                            + " the measured step) or step (the measured step's peak minus the"
                            + " resident size with the model ready: the step's own memory).")
    String capOn;

    @Option(
            names = "--cap-variants",
            defaultValue = "djl-fp32,djl-amp-bf16",
            description = "Variants whose largest batch under the cap is searched.")
    String capVariants;

    @Option(
            names = "--granularity",
            defaultValue = "16",
            description = "The search stops when the bracket is this narrow.")
    int granularity;

    @Option(names = "--max-batch", defaultValue = "4096", description = "Largest batch tried.")
    int maxBatch;

    @Option(
            names = "--child-jvm-options",
            defaultValue = "-Xmx1g",
            split = " ",
            description = "Options of the child JVMs (space-separated).")
    List<String> childJvmOptions;

    @Option(names = "--out", required = true, description = "The JSON file to write.")
    Path out;

    private final JsonArray probes = new JsonArray();

    @Override
    public Integer call() throws Exception {
        if (!capOn.equals("process") && !capOn.equals("step")) {
            throw new IllegalArgumentException("--cap-on is process or step, got '" + capOn + "'");
        }
        Network net = Network.of(network);
        List<Variant> list = Variant.listOf(variants);
        String loadBefore = Load.averages();
        JsonArray table = new JsonArray();
        for (int rep = 1; rep <= repeat; rep++) {
            for (String b : batches.split(",")) {
                for (Variant v : list) {
                    JsonObject row = probe(net, v, Integer.parseInt(b.trim()));
                    row.addProperty("rep", rep);
                    table.add(row);
                }
            }
        }
        JsonArray caps = new JsonArray();
        if (capMib > 0) {
            for (Variant v : Variant.listOf(capVariants)) {
                caps.add(largestUnderCap(net, v, table));
            }
        }
        JsonObject json = new JsonObject();
        json.addProperty("network", net.key());
        json.addProperty("description", net.describe());
        json.addProperty("childJvmOptions", String.join(" ", childJvmOptions));
        json.addProperty("capMib", capMib);
        json.addProperty("capOn", capOn);
        json.addProperty("granularity", granularity);
        json.addProperty("repeat", repeat);
        json.addProperty("loadBefore", loadBefore);
        json.addProperty("loadAfter", Load.averages());
        json.add("table", table);
        json.add("caps", caps);
        json.add("probes", probes);
        Path parent = out.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        Files.writeString(
                out,
                new GsonBuilder().setPrettyPrinting().create().toJson(json) + "\n",
                StandardCharsets.UTF_8);
        return 0;
    }

    private JsonObject largestUnderCap(Network net, Variant v, JsonArray table)
            throws IOException, InterruptedException {
        long capKib = capMib * 1024;
        // a batch size of the table fits when every measurement of it fits
        java.util.Map<Integer, Boolean> measured = new java.util.TreeMap<>();
        for (int i = 0; i < table.size(); i++) {
            JsonObject row = table.get(i).getAsJsonObject();
            if (row.get("variant").getAsString().equals(v.key())) {
                measured.merge(
                        row.get("batch").getAsInt(),
                        fitsUnder(row, capKib, capOn),
                        Boolean::logicalAnd);
            }
        }
        int fits = 0;
        int failsAt = -1;
        for (java.util.Map.Entry<Integer, Boolean> e : measured.entrySet()) {
            if (e.getValue()) {
                fits = Math.max(fits, e.getKey());
            } else if (failsAt < 0) {
                failsAt = e.getKey();
            }
        }
        int next = fits > 0 ? fits * 2 : granularity;
        while (failsAt < 0 && next <= maxBatch) {
            if (fitsUnder(probe(net, v, next), capKib, capOn)) {
                fits = next;
                next *= 2;
            } else {
                failsAt = next;
            }
        }
        while (failsAt > 0 && failsAt - fits > granularity) {
            int mid = (fits + failsAt) / 2 / granularity * granularity;
            if (mid <= fits) {
                mid = fits + granularity;
            }
            if (fitsUnder(probe(net, v, mid), capKib, capOn)) {
                fits = mid;
            } else {
                failsAt = mid;
            }
        }
        JsonObject result = new JsonObject();
        result.addProperty("variant", v.key());
        result.addProperty("label", v.label());
        result.addProperty("largestBatch", fits);
        result.addProperty("firstFailing", failsAt);
        result.addProperty("searchCapped", failsAt < 0);
        System.out.printf(
                "%s: largest batch under %d MiB (%s): %d (fails at %d)%n",
                v.key(), capMib, capOn, fits, failsAt);
        return result;
    }

    static boolean fitsUnder(JsonObject probe, long capKib, String capOn) {
        if (probe.has("error")) {
            return false;
        }
        long used =
                capOn.equals("step")
                        ? probe.get("stepPeakKib").getAsLong()
                                - probe.get("readyRssKib").getAsLong()
                        : probe.get("processPeakKib").getAsLong();
        return used <= capKib;
    }

    private JsonObject probe(Network net, Variant v, int batch)
            throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(javaBinary());
        command.addAll(childJvmOptions);
        command.add("-Dai.djl.offline=true");
        command.add("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn");
        for (String property :
                new String[] {"ai.djl.pytorch.num_threads", "ai.djl.pytorch.num_interop_threads"}) {
            String value = System.getProperty(property);
            if (value != null) {
                command.add("-D" + property + "=" + value);
            }
        }
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(TrainBench.class.getName());
        command.add("memory-probe");
        command.add("--network=" + net.key());
        command.add("--variant=" + v.key());
        command.add("--batch=" + batch);
        Process process =
                new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String result = null;
        try (BufferedReader reader =
                new BufferedReader(
                        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = reader.readLine()) != null) {
                if (line.startsWith(MemoryProbeCommand.PREFIX)) {
                    result = line.substring(MemoryProbeCommand.PREFIX.length());
                }
            }
        }
        int exit = process.waitFor();
        JsonObject json;
        if (exit == 0 && result != null) {
            json = JsonParser.parseString(result).getAsJsonObject();
            if (json.has("glibcInUse")) {
                JsonObject steady =
                        json.getAsJsonObject("glibcInUse").getAsJsonObject("steadyStep");
                System.out.printf(
                        "%-20s batch %5d: glibc in use at backward start %6d MiB, step peak %6d"
                                + " MiB%n",
                        v.key(),
                        batch,
                        steady.get("backwardStartBytes").getAsLong() >> 20,
                        steady.get("peakBytes").getAsLong() >> 20);
            }
            System.out.printf(
                    "%-20s batch %5d: ready %6d MiB, step peak %6d MiB, process peak %6d MiB,"
                            + " step %.0f ms%n",
                    v.key(),
                    batch,
                    json.get("readyRssKib").getAsLong() / 1024,
                    json.get("stepPeakKib").getAsLong() / 1024,
                    json.get("processPeakKib").getAsLong() / 1024,
                    json.get("stepMs").getAsDouble());
        } else {
            json = new JsonObject();
            json.addProperty("network", net.key());
            json.addProperty("variant", v.key());
            json.addProperty("batch", batch);
            json.addProperty("error", "child JVM exited with " + exit);
            System.out.printf("%-20s batch %5d: child JVM exited with %d%n", v.key(), batch, exit);
        }
        probes.add(json);
        return json;
    }

    private static String javaBinary() {
        return Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    }
}
