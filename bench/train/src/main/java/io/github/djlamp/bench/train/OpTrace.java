package io.github.djlamp.bench.train;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * libtorch's profiler trace of some training steps (DJL's {@code JniUtils.stopProfile} writes it as
 * a Chrome trace), cut into steps and phases by marker operations the rig runs: the operations the
 * JVM called into libtorch (those no other operation encloses), their count and their time.
 *
 * <p>A top-level operation is one JNI call reaching libtorch's dispatcher (a JNI call that runs
 * several, such as DJL's backward, shows as several). Its recorded time is libtorch's: dispatch,
 * autograd recording and the kernel. What the step spends outside every top-level operation is the
 * host's: Java, the JNI crossings, DJL's and djl-amp's bookkeeping.
 */
final class OpTrace {

    /** The operation the rig runs at the start of each profiled step. */
    static final String STEP_MARKER = "aten::eye";

    /** The operation the rig runs between the forward and the loss. */
    static final String LOSS_MARKER = "aten::arange";

    private static final String BACKWARD_PREFIX = "autograd::engine::evaluate_function";

    /** One top-level operation: its name, start and duration in microseconds. */
    record Op(String name, double start, double duration) {}

    /** What the top-level operations of one phase add up to, per step. */
    record Phase(double opsPerStep, double opMsPerStep) {
        JsonObject toJson() {
            JsonObject json = new JsonObject();
            json.addProperty("opsPerStep", Math.round(opsPerStep * 10) / 10.0);
            json.addProperty("opMsPerStep", Math.round(opMsPerStep * 1000) / 1000.0);
            return json;
        }
    }

    private final List<List<Op>> steps;

    private OpTrace(List<List<Op>> steps) {
        this.steps = steps;
    }

    /**
     * Reads a trace and cuts it into steps at the step marker; what comes before the first marker
     * is dropped.
     *
     * @param file the trace DJL's profiler wrote
     * @return the steps
     * @throws IOException if the file cannot be read
     */
    static OpTrace read(Path file) throws IOException {
        List<Op> all = new ArrayList<>();
        try (Reader reader = Files.newBufferedReader(file)) {
            JsonElement root = JsonParser.parseReader(reader);
            JsonArray events =
                    root.isJsonArray()
                            ? root.getAsJsonArray()
                            : root.getAsJsonObject().getAsJsonArray("traceEvents");
            for (JsonElement e : events) {
                JsonObject event = e.getAsJsonObject();
                if (!event.has("ph") || !"X".equals(event.get("ph").getAsString())) {
                    continue;
                }
                all.add(
                        new Op(
                                event.get("name").getAsString(),
                                event.get("ts").getAsDouble(),
                                event.has("dur") ? event.get("dur").getAsDouble() : 0));
            }
        }
        all.sort(Comparator.comparingDouble(Op::start).thenComparing(o -> -o.duration()));
        List<Op> top = new ArrayList<>();
        double openUntil = Double.NEGATIVE_INFINITY;
        for (Op op : all) {
            if (op.start() >= openUntil) {
                top.add(op);
                openUntil = op.start() + op.duration();
            }
        }
        List<List<Op>> steps = new ArrayList<>();
        List<Op> current = null;
        for (Op op : top) {
            if (STEP_MARKER.equals(op.name())) {
                current = new ArrayList<>();
                steps.add(current);
            } else if (current != null) {
                current.add(op);
            }
        }
        return new OpTrace(steps);
    }

    /**
     * Returns the number of steps the trace holds.
     *
     * @return the steps between markers
     */
    int steps() {
        return steps.size();
    }

    /**
     * The forward: the top-level operations of each step before the loss marker.
     *
     * @return its operations per step
     */
    Phase forward() {
        return phase(0);
    }

    /**
     * The loss and the backward: from the loss marker to the last operation of the backward.
     *
     * @return its operations per step
     */
    Phase lossAndBackward() {
        return phase(1);
    }

    /**
     * The optimizer step and what follows it: after the backward's last operation.
     *
     * @return its operations per step
     */
    Phase update() {
        return phase(2);
    }

    /**
     * The whole step: every top-level operation after the step marker.
     *
     * @return its operations per step
     */
    Phase step() {
        double count = 0;
        double micros = 0;
        for (List<Op> step : steps) {
            for (Op op : step) {
                count++;
                micros += op.duration();
            }
        }
        return new Phase(count / steps.size(), micros / 1000 / steps.size());
    }

    /** Part 0 before the loss marker, 1 from it to the backward's end, 2 after. */
    private Phase phase(int part) {
        double count = 0;
        double micros = 0;
        for (List<Op> step : steps) {
            int loss = -1;
            int lastBackward = -1;
            for (int i = 0; i < step.size(); i++) {
                if (loss < 0 && LOSS_MARKER.equals(step.get(i).name())) {
                    loss = i;
                }
                if (step.get(i).name().startsWith(BACKWARD_PREFIX)) {
                    lastBackward = i;
                }
            }
            if (loss < 0) {
                throw new IllegalStateException("a profiled step has no loss marker");
            }
            int from = part == 0 ? 0 : part == 1 ? loss + 1 : Math.max(lastBackward, loss) + 1;
            int to = part == 0 ? loss : part == 1 ? Math.max(lastBackward, loss) + 1 : step.size();
            for (int i = from; i < to; i++) {
                count++;
                micros += step.get(i).duration();
            }
        }
        return new Phase(count / steps.size(), micros / 1000 / steps.size());
    }
}
