package io.github.djlamp.bench.train;

import ai.djl.engine.Engine;
import ai.djl.metric.Metric;
import ai.djl.metric.Metrics;
import ai.djl.pytorch.jni.JniUtils;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import io.github.djlamp.amp.cast.ArithmeticShare;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Trains every variant of one network in one JVM, alternating step by step (the order rotates each
 * round, so no variant always runs after the same one), and writes every step's time.
 */
@Command(
        name = "throughput",
        description = "Step times of several variants of one network, alternating, in one JVM.")
final class ThroughputCommand implements Callable<Integer> {

    @Option(
            names = "--network",
            defaultValue = "resnet18",
            description = "resnet18, resnet50, resnet50-224, transformer or transformer-256")
    String network;

    @Option(names = "--batch", defaultValue = "64", description = "Batch size.")
    int batch;

    @Option(
            names = "--variants",
            defaultValue = "djl-fp32,djl-amp-bf16,djl-amp-bf16-nchw",
            description =
                    "Comma-separated: djl-fp32, djl-amp-bf16, djl-amp-bf16-nchw,"
                            + " djl-amp-bf16-fused, djl-amp-bf16-fused-unchecked,"
                            + " djl-amp-bf16-fused-ckpt-stages, djl-amp-fp16, djl-amp-fp16-nchw,"
                            + " djl-amp-fp16-fused, djl-amp-fp16-auto, djl-amp-fp32,"
                            + " djl-amp-fp32-fused, djl-amp-fp32-compiled, djl-amp-bf16-compiled,"
                            + " djl-amp-fp32-dynamic.")
    String variants;

    @Option(names = "--warmup", defaultValue = "5", description = "Untimed steps per variant.")
    int warmup;

    @Option(names = "--steps", defaultValue = "20", description = "Timed steps per variant.")
    int steps;

    @Option(
            names = "--phases",
            description =
                    "Also record DJL's per-phase metrics (forward, backward, step; the rest of the"
                            + " step is listeners and freeing the batch).")
    boolean phases;

    @Option(names = "--out", required = true, description = "The JSON file to write.")
    Path out;

    @Override
    public Integer call() throws Exception {
        Network net = Network.of(network);
        List<Variant> list = Variant.listOf(variants);
        String loadBefore = Load.averages();
        Load load = Load.start();
        List<TrainingRig> rigs = new ArrayList<>();
        try {
            // on a GPU: the memory in use before any model exists (the CUDA context)
            DeviceMemory memory = DeviceMemory.start(Engine.getInstance().defaultDevice());
            for (Variant v : list) {
                rigs.add(TrainingRig.create(net, v, batch));
            }
            // each variant's first step, timed apart: a fresh process's first step, with what
            // djl-amp does once (kernel checks) and what the engine does once (kernel choice, JIT)
            double[] firstMs = new double[rigs.size()];
            for (int i = 0; i < warmup; i++) {
                for (int k = 0; k < rigs.size(); k++) {
                    long ns;
                    // on a GPU, the first step's height: djl-amp empties libtorch's cache at its
                    // end, so the reading after it is low
                    try (DeviceMemory.StepPoller poller =
                            i == 0 && memory != null ? memory.pollFirstStep() : null) {
                        ns = rigs.get(k).step();
                    }
                    if (i == 0) {
                        firstMs[k] = ns / 1e6;
                    }
                    sample(memory);
                }
            }
            if (memory != null) {
                memory.startSteady();
            }
            if (phases) {
                for (TrainingRig rig : rigs) {
                    rig.getTrainer().setMetrics(new Metrics());
                }
            }
            double[][] ms = new double[rigs.size()][steps];
            for (int round = 0; round < steps; round++) {
                for (int k = 0; k < rigs.size(); k++) {
                    int index = (round + k) % rigs.size();
                    ms[index][round] = rigs.get(index).step() / 1e6;
                    sample(memory);
                }
            }
            JsonObject json = new JsonObject();
            json.addProperty("framework", "DJL");
            json.addProperty(
                    "frameworkVersion",
                    "DJL "
                            + Engine.getDjlVersion()
                            + ", PyTorch engine "
                            + Engine.getInstance().getVersion());
            json.addProperty("network", net.key());
            json.addProperty("description", net.describe());
            json.addProperty("batch", batch);
            json.addProperty("device", rigs.get(0).getDevice().toString());
            if (memory != null) {
                // one number for the whole JVM: run one variant a JVM to attribute it
                json.add("deviceMemory", memory.toJson());
            } else {
                // no device memory to read: the process's peak resident size stands in (what a
                // CPU dry run of bench/gpu's cap search reads; not comparable across frameworks)
                json.addProperty("hostPeakRssKib", ProcStatus.peakKib());
            }
            json.addProperty("threads", JniUtils.getNumThreads());
            json.addProperty("parameters", rigs.get(0).parameterCount());
            json.addProperty("parameterShapes", rigs.get(0).parameterShapes());
            json.addProperty("warmup", warmup);
            json.addProperty("loadBefore", loadBefore);
            json.addProperty("loadAfter", Load.averages());
            json.addProperty("otherCores", Math.round(load.otherCores() * 100) / 100.0);
            JsonArray variantsJson = new JsonArray();
            for (int k = 0; k < rigs.size(); k++) {
                JsonObject v = new JsonObject();
                v.addProperty("key", rigs.get(k).getVariant().key());
                v.addProperty("label", rigs.get(k).getVariant().label());
                JsonArray times = new JsonArray();
                for (double t : ms[k]) {
                    times.add(Math.round(t * 1000) / 1000.0);
                }
                v.add("stepMs", times);
                if (warmup > 0) {
                    v.addProperty("firstStepMs", Math.round(firstMs[k] * 1000) / 1000.0);
                }
                ArithmeticShare share = rigs.get(k).arithmeticShare();
                if (share != null) {
                    // the share of the FLOPs of the layers that ran that djl-amp computed in 16
                    // bits
                    v.addProperty("lowPrecisionShare", share.getLowShare());
                    List<String> islands = rigs.get(k).fp32Islands();
                    JsonArray islandsJson = new JsonArray();
                    islands.forEach(islandsJson::add);
                    v.add("fp32Islands", islandsJson);
                    System.out.printf(
                            "%-22s %.1f%% of the arithmetic in 16 bits, %d fp32 islands%n",
                            rigs.get(k).getVariant().key(),
                            100 * share.getLowShare(),
                            islands.size());
                }
                String capture = rigs.get(k).captureState();
                if (capture != null) {
                    v.addProperty("capture", capture);
                    System.out.printf(
                            "%-22s captured step: %s%n", rigs.get(k).getVariant().key(), capture);
                }
                variantsJson.add(v);
                Samples s = new Samples(ms[k]);
                if (phases) {
                    JsonObject phaseJson = phaseMedians(rigs.get(k).getTrainer().getMetrics());
                    phaseJson.addProperty(
                            "other",
                            Math.round(
                                            (s.median()
                                                            - phaseJson.get("forward").getAsDouble()
                                                            - phaseJson
                                                                    .get("backward")
                                                                    .getAsDouble()
                                                            - phaseJson.get("step").getAsDouble())
                                                    * 100)
                                    / 100.0);
                    v.add("phasesMs", phaseJson);
                    System.out.println(rigs.get(k).getVariant().key() + " phases: " + phaseJson);
                }
                System.out.printf(
                        "%-22s median %8.1f ms  (IQR %.1f-%.1f)  %7.1f img/s%n",
                        rigs.get(k).getVariant().key(),
                        s.median(),
                        s.q1(),
                        s.q3(),
                        batch * 1000 / s.median());
            }
            json.add("variants", variantsJson);
            Path parent = out.toAbsolutePath().getParent();
            if (parent != null) {
                Files.createDirectories(parent);
            }
            Files.writeString(
                    out,
                    new GsonBuilder().setPrettyPrinting().create().toJson(json) + "\n",
                    StandardCharsets.UTF_8);
            return 0;
        } finally {
            for (TrainingRig rig : rigs) {
                rig.close();
            }
        }
    }

    private static void sample(DeviceMemory memory) {
        if (memory != null) {
            memory.sample();
        }
    }

    /** The median of each of DJL's training metrics, in milliseconds. */
    private static JsonObject phaseMedians(Metrics metrics) {
        JsonObject json = new JsonObject();
        for (String phase : new String[] {"forward", "backward", "step"}) {
            List<Double> values = new ArrayList<>();
            for (Metric m : metrics.getMetric(phase)) {
                values.add(m.getValue().doubleValue() / 1e6);
            }
            json.addProperty(
                    phase,
                    values.isEmpty() ? 0 : Math.round(Samples.of(values).median() * 100) / 100.0);
        }
        return json;
    }
}
