package io.github.djlamp.bench.train;

import ai.djl.engine.Engine;
import ai.djl.pytorch.jni.JniUtils;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.github.djlamp.amp.verify.KernelVerdict;
import io.github.djlamp.amp.verify.KernelVerdicts;
import io.github.djlamp.amp.verify.KernelVerification;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * What djl-amp's kernel verification costs: the first training step with {@link
 * KernelVerification#ON} (every 16-bit convolution and linear kernel signature of the model checked
 * against fp32, forward and backward) against {@link KernelVerification#OFF}, and the steady-state
 * step of both, which should not differ (after the first step a verdict is a map lookup per layer).
 *
 * <p>Three measurements:
 *
 * <ol>
 *   <li>steady state: one model of each setting in this JVM, alternating step by step (rotating
 *       order) after a warm-up;
 *   <li>first step in a warm JVM: a fresh model per repetition after {@link
 *       KernelVerdicts#forgetAll()}, ON and OFF alternating, so the difference is the checks alone
 *       (the engine's own first-use costs are already paid);
 *   <li>first step in a fresh JVM: one child JVM per first step ({@code verification-probe}), ON
 *       and OFF alternating, what a program pays at its start (JIT, class loading and the engine's
 *       first kernels are in both sides).
 * </ol>
 */
@Command(
        name = "verification",
        description =
                "First-step cost of djl-amp's kernel verification (ON vs OFF) and the steady-state"
                        + " step of both.")
final class VerificationCommand implements Callable<Integer> {

    @Option(names = "--network", defaultValue = "resnet50", description = VerificationRig.NETWORKS)
    String network;

    @Option(names = "--batch", defaultValue = "8", description = "Batch size.")
    int batch;

    @Option(names = "--policy", defaultValue = "mixed_bfloat16", description = "djl-amp policy.")
    String policy;

    @Option(
            names = "--warmup",
            defaultValue = "2",
            description = "Untimed steps per model before the steady-state steps.")
    int warmup;

    @Option(
            names = "--steps",
            defaultValue = "10",
            description = "Steady-state steps per setting (alternating).")
    int steps;

    @Option(
            names = "--repeat",
            defaultValue = "3",
            description = "First steps per setting in this JVM, each of a fresh model.")
    int repeat;

    @Option(
            names = "--jvms",
            defaultValue = "3",
            description = "First steps per setting in fresh JVMs, one child JVM each (0: none).")
    int jvms;

    @Option(
            names = "--child-jvm-options",
            defaultValue = "-Xmx2g",
            split = " ",
            description = "Options of the child JVMs (space-separated).")
    List<String> childJvmOptions;

    @Option(names = "--out", required = true, description = "The JSON file to write.")
    Path out;

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private static final KernelVerification[] SETTINGS = {
        KernelVerification.ON, KernelVerification.OFF
    };

    @Override
    public Integer call() throws Exception {
        String loadBefore = Load.averages();
        Load load = Load.start();
        JsonObject json = new JsonObject();
        json.addProperty(
                "frameworkVersion",
                "DJL "
                        + Engine.getDjlVersion()
                        + ", PyTorch engine "
                        + Engine.getInstance().getVersion());
        json.addProperty("network", network);
        json.addProperty("description", VerificationRig.describe(network));
        json.addProperty("batch", batch);
        json.addProperty("policy", policy);
        json.addProperty("threads", JniUtils.getNumThreads());

        // 1. steady state, which also warms the engine up for part 2
        Map<KernelVerification, List<Double>> steady = new EnumMap<>(KernelVerification.class);
        Map<KernelVerification, Double> firstInJvm = new EnumMap<>(KernelVerification.class);
        KernelVerdicts.forgetAll();
        try (VerificationRig on =
                        VerificationRig.create(network, policy, KernelVerification.ON, batch);
                VerificationRig off =
                        VerificationRig.create(network, policy, KernelVerification.OFF, batch)) {
            VerificationRig[] rigs = {on, off};
            for (int k = 0; k < rigs.length; k++) {
                firstInJvm.put(SETTINGS[k], rigs[k].step() / 1e6);
            }
            for (int i = 0; i < warmup; i++) {
                on.step();
                off.step();
            }
            for (KernelVerification s : SETTINGS) {
                steady.put(s, new ArrayList<>());
            }
            for (int round = 0; round < steps; round++) {
                for (int k = 0; k < rigs.length; k++) {
                    int index = (round + k) % rigs.length;
                    steady.get(SETTINGS[index]).add(rigs[index].step() / 1e6);
                }
            }
            System.out.printf(
                    Locale.ROOT,
                    "steady state (%d alternating steps): ON %.1f ms, OFF %.1f ms (medians)%n",
                    steps,
                    median(steady.get(KernelVerification.ON)),
                    median(steady.get(KernelVerification.OFF)));
        }

        // 2. first step of a fresh model in this (warm) JVM, verdicts forgotten
        Map<KernelVerification, List<Double>> warmFirst = new EnumMap<>(KernelVerification.class);
        Map<KernelVerification, List<Double>> warmFirstCpu =
                new EnumMap<>(KernelVerification.class);
        for (KernelVerification s : SETTINGS) {
            warmFirst.put(s, new ArrayList<>());
            warmFirstCpu.put(s, new ArrayList<>());
        }
        int signatures = 0;
        int layers = 0;
        int defects = 0;
        List<String> verdictLines = new ArrayList<>();
        for (int rep = 0; rep < repeat; rep++) {
            for (int k = 0; k < SETTINGS.length; k++) {
                KernelVerification s = SETTINGS[(rep + k) % SETTINGS.length];
                KernelVerdicts.forgetAll();
                try (VerificationRig rig = VerificationRig.create(network, policy, s, batch)) {
                    // with one intra-op thread libtorch computes on the calling thread, so its CPU
                    // time is the step's work whatever else the machine runs
                    long cpuBefore = THREADS.getCurrentThreadCpuTime();
                    double ms = rig.step() / 1e6;
                    warmFirstCpu.get(s).add((THREADS.getCurrentThreadCpuTime() - cpuBefore) / 1e6);
                    warmFirst.get(s).add(ms);
                    List<KernelVerdict> verdicts = KernelVerdicts.all();
                    System.out.printf(
                            Locale.ROOT,
                            "warm JVM, fresh verdicts, %s: first step %.1f ms, %d signatures"
                                    + " checked%n",
                            s,
                            ms,
                            verdicts.size());
                    if (s == KernelVerification.ON) {
                        signatures = verdicts.size();
                        layers = layers(verdicts);
                        defects = KernelVerdicts.defects().size();
                        verdictLines.clear();
                        for (KernelVerdict v : verdicts) {
                            verdictLines.add(v.getPaths() + ": " + v);
                        }
                    }
                }
            }
        }
        KernelVerdicts.forgetAll();

        // 3. first step in a fresh JVM
        Map<KernelVerification, List<Double>> coldFirst = new EnumMap<>(KernelVerification.class);
        Map<KernelVerification, List<Double>> coldLater = new EnumMap<>(KernelVerification.class);
        for (KernelVerification s : SETTINGS) {
            coldFirst.put(s, new ArrayList<>());
            coldLater.put(s, new ArrayList<>());
        }
        JsonArray probes = new JsonArray();
        for (int rep = 0; rep < jvms; rep++) {
            for (int k = 0; k < SETTINGS.length; k++) {
                KernelVerification s = SETTINGS[(rep + k) % SETTINGS.length];
                JsonObject probe = probe(s);
                probes.add(probe);
                if (probe.has("firstStepMs")) {
                    coldFirst.get(s).add(probe.get("firstStepMs").getAsDouble());
                    for (var later : probe.getAsJsonArray("laterStepsMs")) {
                        coldLater.get(s).add(later.getAsDouble());
                    }
                }
            }
        }

        json.addProperty("signatures", signatures);
        json.addProperty("layersChecked", layers);
        json.addProperty("defects", defects);
        JsonArray verdictJson = new JsonArray();
        verdictLines.forEach(verdictJson::add);
        json.add("verdicts", verdictJson);
        for (KernelVerification s : SETTINGS) {
            String key = s.name().toLowerCase(Locale.ROOT);
            JsonObject part = new JsonObject();
            part.addProperty("firstStepFirstModelInJvmMs", firstInJvm.get(s));
            part.add("steadyMs", array(steady.get(s)));
            part.add("warmJvmFirstStepMs", array(warmFirst.get(s)));
            part.add("warmJvmFirstStepThreadCpuMs", array(warmFirstCpu.get(s)));
            part.add("freshJvmFirstStepMs", array(coldFirst.get(s)));
            part.add("freshJvmLaterStepsMs", array(coldLater.get(s)));
            json.add(key, part);
        }
        json.add("probes", probes);
        json.addProperty("loadBefore", loadBefore);
        json.addProperty("loadAfter", Load.averages());
        json.addProperty("otherCores", Math.round(load.otherCores() * 100) / 100.0);
        Path parent = out.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        Files.writeString(
                out,
                new GsonBuilder().setPrettyPrinting().create().toJson(json) + "\n",
                StandardCharsets.UTF_8);

        System.out.println();
        System.out.println("Kernel signatures checked: " + verdictLines.size());
        verdictLines.forEach(line -> System.out.println("  " + line));
        System.out.println();
        System.out.printf(
                Locale.ROOT,
                "%s, batch %d, %s; %d signatures checked (%d layers), %d defects%n%n",
                VerificationRig.describe(network),
                batch,
                policy,
                signatures,
                layers,
                defects);
        System.out.println("| step | verification ON ms | OFF ms | ON − OFF ms | ON / OFF | n |");
        System.out.println("| --- | ---: | ---: | ---: | ---: | ---: |");
        row("first step, fresh JVM (child JVM each)", coldFirst);
        row("first step, warm JVM, fresh model, verdicts forgotten", warmFirst);
        row(
                "the same first steps, CPU time of the training thread (one intra-op thread)",
                warmFirstCpu);
        row("steady state, alternating", steady);
        row("steps 2.. of the fresh JVMs", coldLater);
        System.out.printf(
                Locale.ROOT,
                "%nload average %s -> %s; other processes kept %.2f cores busy%n",
                loadBefore,
                Load.averages(),
                load.otherCores());
        return 0;
    }

    private static void row(String what, Map<KernelVerification, List<Double>> ms) {
        List<Double> on = ms.get(KernelVerification.ON);
        List<Double> off = ms.get(KernelVerification.OFF);
        if (on.isEmpty() || off.isEmpty()) {
            System.out.printf("| %s | not run | | | | |%n", what);
            return;
        }
        double a = median(on);
        double b = median(off);
        System.out.printf(
                Locale.ROOT,
                "| %s | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | %+.0f | %.2fx | %d + %d |%n",
                what,
                a,
                min(on),
                max(on),
                b,
                min(off),
                max(off),
                a - b,
                a / b,
                on.size(),
                off.size());
    }

    /** Returns the number of distinct layers of any model whose kernels these verdicts cover. */
    static int layers(List<KernelVerdict> verdicts) {
        Set<String> paths = new HashSet<>();
        for (KernelVerdict v : verdicts) {
            paths.addAll(v.getPaths());
        }
        return paths.size();
    }

    private JsonObject probe(KernelVerification s) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
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
        command.add("verification-probe");
        command.add("--network=" + network);
        command.add("--batch=" + batch);
        command.add("--policy=" + policy);
        command.add("--verification=" + s.name());
        Process process =
                new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String result = null;
        try (BufferedReader reader =
                new BufferedReader(
                        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = reader.readLine()) != null) {
                if (line.startsWith(VerificationProbeCommand.PREFIX)) {
                    result = line.substring(VerificationProbeCommand.PREFIX.length());
                }
            }
        }
        int exit = process.waitFor();
        if (exit == 0 && result != null) {
            JsonObject json = JsonParser.parseString(result).getAsJsonObject();
            System.out.printf(
                    Locale.ROOT,
                    "fresh JVM, %s: first step %.1f ms, %d signatures (%d kept by an earlier JVM),"
                            + " later steps %s ms%n",
                    s,
                    json.get("firstStepMs").getAsDouble(),
                    json.get("signatures").getAsInt(),
                    json.get("signaturesKept").getAsInt(),
                    json.get("laterStepsMs"));
            return json;
        }
        JsonObject json = new JsonObject();
        json.addProperty("verification", s.name());
        json.addProperty("error", "child JVM exited with " + exit);
        System.out.printf("fresh JVM, %s: child JVM exited with %d%n", s, exit);
        return json;
    }

    private static JsonArray array(List<Double> values) {
        JsonArray a = new JsonArray();
        values.forEach(a::add);
        return a;
    }

    private static double median(List<Double> values) {
        return Samples.of(values).median();
    }

    private static double min(List<Double> values) {
        return Samples.of(values).quantile(0);
    }

    private static double max(List<Double> values) {
        return Samples.of(values).quantile(1);
    }
}
