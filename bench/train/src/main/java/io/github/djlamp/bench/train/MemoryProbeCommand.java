package io.github.djlamp.bench.train;

import com.google.gson.Gson;
import com.google.gson.JsonObject;
import io.github.djlamp.amp.cast.ArithmeticShare;
import io.github.djlamp.amp.cast.internal.CheckpointControl;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Measures one configuration's memory in a JVM of its own (started by {@link MemoryCommand}): the
 * resident size with the model ready, the peak over the warm-up steps, and the peak of one
 * steady-state step (the high-water mark reset just before it); and glibc's in-use bytes ({@link
 * StepMemory}: forward start, backward start, peak, after the step) over the first step and the
 * steady-state step, apart. Prints one line {@code RESULT {json}}.
 */
@Command(
        name = "memory-probe",
        description = "Peak resident memory of training steps of one configuration (child JVM).")
final class MemoryProbeCommand implements Callable<Integer> {

    /** The prefix of the line that carries the measurement. */
    static final String PREFIX = "RESULT ";

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    @Option(
            names = "--network",
            defaultValue = "resnet18",
            description = "resnet18, resnet50, resnet50-224, transformer or transformer-256")
    String network;

    @Option(names = "--variant", required = true, description = "A variant key, e.g. djl-fp32.")
    String variant;

    @Option(names = "--batch", required = true, description = "Batch size.")
    int batch;

    @Option(
            names = "--warmup",
            defaultValue = "1",
            description = "Steps before the high-water mark is reset.")
    int warmup;

    @Override
    public Integer call() {
        Network net = Network.of(network);
        Variant v = Variant.of(variant);
        try (TrainingRig rig = TrainingRig.create(net, v, batch)) {
            long readyKib = ProcStatus.rssKib();
            boolean glibc = GlibcHeap.available();
            long readyInUse = glibc ? GlibcHeap.inUseBytes() : -1;
            StepMemory first = glibc && warmup > 0 ? new StepMemory() : null;
            long warmupNanos = 0;
            // one intra-op thread computes on this thread: its CPU time is the steps' work,
            // whatever else the machine runs
            long cpuStart = THREADS.getCurrentThreadCpuTime();
            for (int i = 0; i < warmup; i++) {
                warmupNanos += rig.step(i == 0 ? first : null);
            }
            long warmupCpuNanos = THREADS.getCurrentThreadCpuTime() - cpuStart;
            long warmupPeakKib = ProcStatus.peakKib();
            long beforeStepKib = ProcStatus.rssKib();
            StepMemory steady = glibc ? new StepMemory() : null;
            ProcStatus.resetPeak();
            long stepCpuStart = THREADS.getCurrentThreadCpuTime();
            long stepNanos = rig.step(steady);
            long stepCpuNanos = THREADS.getCurrentThreadCpuTime() - stepCpuStart;
            long stepPeakKib = ProcStatus.peakKib();
            JsonObject json = new JsonObject();
            json.addProperty("network", net.key());
            json.addProperty("variant", v.key());
            json.addProperty("batch", batch);
            json.addProperty("readyRssKib", readyKib);
            json.addProperty("warmupPeakKib", warmupPeakKib);
            json.addProperty("beforeStepRssKib", beforeStepKib);
            json.addProperty("stepPeakKib", stepPeakKib);
            json.addProperty("processPeakKib", Math.max(warmupPeakKib, stepPeakKib));
            json.addProperty("warmupMs", warmupNanos / 1e6);
            json.addProperty("stepMs", stepNanos / 1e6);
            json.addProperty("warmupThreadCpuMs", warmupCpuNanos / 1e6);
            json.addProperty("stepThreadCpuMs", stepCpuNanos / 1e6);
            if (glibc) {
                JsonObject inUse = new JsonObject();
                inUse.addProperty("method", GlibcHeap.METHOD);
                inUse.addProperty("readyBytes", readyInUse);
                if (first != null) {
                    inUse.add("firstStep", first.toJson());
                }
                inUse.add("steadyStep", steady.toJson());
                json.add("glibcInUse", inUse);
            }
            ArithmeticShare share = rig.arithmeticShare();
            if (share != null) {
                json.addProperty("lowPrecisionShare", share.getLowShare());
            }
            CheckpointControl.SavingEstimate estimate = rig.checkpointSavingEstimate();
            if (estimate != null) {
                json.addProperty("checkpointKeptKib", estimate.keptBytes() / 1024);
                json.addProperty("checkpointDroppedKib", estimate.droppedBytes() / 1024);
                json.addProperty(
                        "checkpointUpperSavingKib", estimate.upperBoundSavingBytes() / 1024);
            }
            System.out.println(PREFIX + new Gson().toJson(json));
        }
        return 0;
    }
}
