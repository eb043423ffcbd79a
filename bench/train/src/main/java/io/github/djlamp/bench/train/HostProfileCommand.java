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
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Where the host's time goes in a training step, variant by variant (issue 41 item 1): Java code
 * (djl-amp's, DJL's), native calls (made by DJL's operations or by djl-amp), from the JDK's sampler
 * over some steps; then, over as many more with libtorch's profiler on, the operations the JVM
 * called into libtorch per phase, their count and their time inside libtorch, and so the forward's
 * host time: the forward's wall time less its operations' time.
 *
 * <p>Each variant runs alone in the JVM (its own rig, warmed up), so the samples are its own.
 */
@Command(
        name = "host",
        description =
                "Where a step's host time goes: Java (djl-amp, DJL), native calls, libtorch's"
                        + " operations per phase.")
final class HostProfileCommand implements Callable<Integer> {

    @Option(
            names = "--network",
            defaultValue = "resnet18",
            description = "resnet18, resnet50, transformer, ...")
    String network;

    @Option(names = "--batch", defaultValue = "1", description = "Batch size.")
    int batch;

    @Option(
            names = "--variants",
            defaultValue = "djl-fp32,djl-amp-fp32,djl-amp-bf16-fused",
            description = "Comma-separated variants, as for throughput.")
    String variants;

    @Option(names = "--warmup", defaultValue = "5", description = "Untimed steps per variant.")
    int warmup;

    @Option(names = "--steps", defaultValue = "30", description = "Steps per window.")
    int steps;

    @Option(names = "--out", required = true, description = "The JSON file to write.")
    Path out;

    @Override
    public Integer call() throws Exception {
        Network net = Network.of(network);
        JsonObject json = new JsonObject();
        json.addProperty(
                "frameworkVersion",
                "DJL " + Engine.getDjlVersion() + ", PyTorch " + Engine.getInstance().getVersion());
        json.addProperty("network", net.key());
        json.addProperty("description", net.describe());
        json.addProperty("batch", batch);
        json.addProperty("threads", JniUtils.getNumThreads());
        json.addProperty("loadBefore", Load.averages());
        JsonArray variantsJson = new JsonArray();
        Path dir = Files.createTempDirectory("djl-amp-host");
        System.out.printf(
                "%-22s %7s %7s | %7s %7s %7s %7s %7s | %7s %6s %7s %7s | %6s %6s | %6s %7s%n",
                "variant", "step", "fwd", "ampJava", "djlJava", "other", "djlNat", "ampNat",
                "fwdWall", "fwdOps", "fwdOpMs", "fwdHost", "bwdOps", "updOps", "ops", "host");
        for (Variant variant : Variant.listOf(variants)) {
            try (TrainingRig rig = TrainingRig.create(net, variant, batch)) {
                for (int i = 0; i < warmup; i++) {
                    rig.step();
                }
                JsonObject v = new JsonObject();
                v.addProperty("key", variant.key());
                ArithmeticShare share = rig.arithmeticShare();
                if (share != null) {
                    v.addProperty("lowPrecisionShare", share.getLowShare());
                }
                rig.getTrainer().setMetrics(new Metrics());
                JsonObject sampled;
                try (HostSamples samples = new HostSamples()) {
                    for (int i = 0; i < steps; i++) {
                        samples.sample(rig::step);
                    }
                    sampled = samples.attribute(dir.resolve(variant.key() + ".jfr"));
                }
                sampled.addProperty("forwardMs", mean(rig.getTrainer().getMetrics(), "forward"));
                v.add("sampled", sampled);

                rig.getTrainer().setMetrics(new Metrics());
                Path trace = dir.resolve(variant.key() + "-trace.json");
                double profiledMs = 0;
                JniUtils.startProfile(false, false, false);
                try {
                    for (int i = 0; i < steps; i++) {
                        profiledMs += rig.markedStep() / 1e6;
                    }
                } finally {
                    JniUtils.stopProfile(trace.toString());
                }
                OpTrace ops = OpTrace.read(trace);
                double forwardWall = mean(rig.getTrainer().getMetrics(), "forward");
                JsonObject profiled = new JsonObject();
                profiled.addProperty("steps", ops.steps());
                profiled.addProperty("stepMs", round(profiledMs / steps));
                profiled.addProperty("forwardMs", forwardWall);
                profiled.add("forward", ops.forward().toJson());
                profiled.add("lossAndBackward", ops.lossAndBackward().toJson());
                profiled.add("update", ops.update().toJson());
                double forwardHost = forwardWall - ops.forward().opMsPerStep();
                profiled.addProperty("forwardHostMs", round(forwardHost));
                double updateWall = mean(rig.getTrainer().getMetrics(), "step");
                profiled.addProperty("updateMs", updateWall);
                profiled.addProperty(
                        "updateHostMs", round(updateWall - ops.update().opMsPerStep()));
                profiled.add("step", ops.step().toJson());
                double stepHost = profiledMs / steps - ops.step().opMsPerStep();
                profiled.addProperty("stepHostMs", round(stepHost));
                v.add("profiled", profiled);
                variantsJson.add(v);
                System.out.printf(
                        "%-22s %7.2f %7.2f | %7.2f %7.2f %7.2f %7.2f %7.2f | %7.2f %6.0f %7.2f"
                                + " %7.2f | %6.0f %6.0f | %6.0f %7.2f%n",
                        variant.key(),
                        sampled.get("stepMs").getAsDouble(),
                        sampled.get("forwardMs").getAsDouble(),
                        sampled.get("djlAmpJavaMs").getAsDouble(),
                        sampled.get("djlJavaMs").getAsDouble(),
                        sampled.get("otherJavaMs").getAsDouble(),
                        sampled.get("djlNativeMs").getAsDouble(),
                        sampled.get("djlAmpNativeMs").getAsDouble(),
                        forwardWall,
                        ops.forward().opsPerStep(),
                        ops.forward().opMsPerStep(),
                        forwardHost,
                        ops.lossAndBackward().opsPerStep(),
                        ops.update().opsPerStep(),
                        ops.step().opsPerStep(),
                        stepHost);
            }
        }
        json.add("variants", variantsJson);
        json.addProperty("loadAfter", Load.averages());
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

    /** The mean of one of DJL's training metrics, in milliseconds. */
    private static double mean(Metrics metrics, String name) {
        double sum = 0;
        int n = 0;
        if (metrics.hasMetric(name)) {
            for (Metric m : metrics.getMetric(name)) {
                sum += m.getValue().doubleValue() / 1e6;
                n++;
            }
        }
        return n == 0 ? 0 : round(sum / n);
    }

    private static double round(double ms) {
        return Math.round(ms * 1000) / 1000.0;
    }
}
