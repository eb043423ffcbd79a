package io.github.djlamp.bench.train;

import com.google.gson.JsonObject;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordedThread;
import jdk.jfr.consumer.RecordingFile;

/**
 * Where the training thread's time goes, from the JDK's own sampler (Flight Recorder's execution
 * and native-method samples, every millisecond): in Java code, whose (djl-amp's or DJL's), or in a
 * native call, made by whom (an operation of DJL's blocks, losses and optimizers, or one djl-amp
 * asks for).
 *
 * <p>A sample counts only inside a step's interval; each share is scaled to the steps' mean wall
 * time.
 */
final class HostSamples implements AutoCloseable {

    /** What a sample of the training thread was doing. */
    enum Where {
        /** Running djl-amp's Java code. */
        AMP_JAVA("djlAmpJavaMs"),
        /** Running DJL's Java code (its blocks, the trainer, the NDArray layer). */
        DJL_JAVA("djlJavaMs"),
        /** Running other Java code: the JDK under nobody's frame, the harness. */
        OTHER_JAVA("otherJavaMs"),
        /** In a native call an operation of DJL's made. */
        DJL_NATIVE("djlNativeMs"),
        /** In a native call djl-amp made (casts, checks, fused kernels, releases). */
        AMP_NATIVE("djlAmpNativeMs");

        final String key;

        Where(String key) {
            this.key = key;
        }
    }

    private final Recording recording = new Recording();
    private final List<Instant[]> steps = new ArrayList<>();
    private final String thread = Thread.currentThread().getName();

    HostSamples() {
        recording.enable("jdk.ExecutionSample").withPeriod(Duration.ofMillis(1));
        recording.enable("jdk.NativeMethodSample").withPeriod(Duration.ofMillis(1));
        recording.start();
    }

    /**
     * Runs one step and keeps its interval.
     *
     * @param step the step
     */
    void sample(Runnable step) {
        Instant start = Instant.now();
        step.run();
        steps.add(new Instant[] {start, Instant.now()});
    }

    /**
     * Stops the recording and attributes its samples.
     *
     * @param dump where to write the recording
     * @return milliseconds per step for each {@link Where}, and the samples counted
     * @throws IOException if the recording cannot be written or read
     */
    JsonObject attribute(Path dump) throws IOException {
        recording.stop();
        recording.dump(dump);
        Map<Where, Integer> counts = new EnumMap<>(Where.class);
        int total = 0;
        for (RecordedEvent event : RecordingFile.readAllEvents(dump)) {
            RecordedThread sampled = event.getThread("sampledThread");
            if (sampled == null
                    || !thread.equals(sampled.getJavaName())
                    || !inStep(event.getStartTime())) {
                continue;
            }
            boolean inNative = "jdk.NativeMethodSample".equals(event.getEventType().getName());
            counts.merge(where(event.getStackTrace(), inNative), 1, Integer::sum);
            total++;
        }
        double wallMs = 0;
        for (Instant[] step : steps) {
            wallMs += Duration.between(step[0], step[1]).toNanos() / 1e6;
        }
        double msPerStep = wallMs / steps.size();
        JsonObject json = new JsonObject();
        json.addProperty("stepMs", round(msPerStep));
        for (Where where : Where.values()) {
            double share = total == 0 ? 0 : counts.getOrDefault(where, 0) / (double) total;
            json.addProperty(where.key, round(share * msPerStep));
        }
        json.addProperty("samples", total);
        return json;
    }

    private boolean inStep(Instant time) {
        for (Instant[] step : steps) {
            if (!time.isBefore(step[0]) && !time.isAfter(step[1])) {
                return true;
            }
        }
        return false;
    }

    /**
     * A Java sample belongs to the innermost frame of djl-amp's or DJL's; a native one to the
     * innermost frame above the engine layer (DJL's NDArray and PyTorch classes only pass the call
     * on).
     */
    static Where where(RecordedStackTrace trace, boolean inNative) {
        if (trace == null) {
            return inNative ? Where.DJL_NATIVE : Where.OTHER_JAVA;
        }
        for (RecordedFrame frame : trace.getFrames()) {
            String type = frame.getMethod().getType().getName();
            if (inNative && passesCallOn(type)) {
                continue;
            }
            if (type.startsWith("io.github.djlamp.bench.")) {
                return inNative ? Where.DJL_NATIVE : Where.OTHER_JAVA;
            }
            if (type.startsWith("io.github.djlamp.")) {
                return inNative ? Where.AMP_NATIVE : Where.AMP_JAVA;
            }
            if (type.startsWith("ai.djl.")) {
                return inNative ? Where.DJL_NATIVE : Where.DJL_JAVA;
            }
        }
        return inNative ? Where.DJL_NATIVE : Where.OTHER_JAVA;
    }

    private static boolean passesCallOn(String type) {
        return type.startsWith("ai.djl.pytorch.")
                || type.startsWith("ai.djl.ndarray.")
                || type.startsWith("java.")
                || type.startsWith("jdk.")
                || type.startsWith("sun.")
                || type.startsWith("com.sun.jna.");
    }

    private static double round(double ms) {
        return Math.round(ms * 1000) / 1000.0;
    }

    @Override
    public void close() {
        recording.close();
    }
}
