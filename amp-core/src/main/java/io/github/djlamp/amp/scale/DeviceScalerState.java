package io.github.djlamp.amp.scale;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.DeviceScaleState;
import io.github.djlamp.amp.spi.DynamicScaleSettings;
import java.util.List;

/**
 * The arrays of a loss scaler whose state stays on the device: the scale state the device updates
 * each step ({@link DeviceScaleState}), and what the host learns only at its periodic reads
 * (collapses since the last read, a fixed scale's run of overflows). They live on a sub-manager of
 * the scaler's, closed with the scaler or when a restored state replaces them.
 */
final class DeviceScalerState implements AutoCloseable {

    /**
     * One host read of the whole state.
     *
     * @param scale the loss scale
     * @param growthTracker clean steps towards the next growth
     * @param overflowsSinceChange overflows towards the next backoff
     * @param skippedSteps skipped steps
     * @param collapsed whether a backoff below the minimum happened since the last read
     * @param overflowRun the current run of overflowing steps
     * @param longestOverflowRun the longest run since the last read
     * @param foundInf the current step's verdict
     */
    record Reading(
            float scale,
            int growthTracker,
            int overflowsSinceChange,
            long skippedSteps,
            boolean collapsed,
            int overflowRun,
            int longestOverflowRun,
            boolean foundInf) {}

    private final NDManager manager;
    private final DeviceScaleState state;
    private final NDArray scale; // a 0-dimensional view of state's scale
    private final NDArray one; // FP32 0-dimensional 1
    private final NDArray collapses; // FP32 (1): collapses since the last host read
    private final NDArray overflowRun; // FP32 (1): consecutive overflows (a fixed scale's failure)
    private final NDArray overflowRunPeak; // FP32 (1): the longest run since the last host read

    DeviceScalerState(ScalerState start, NDManager parent, Device device) {
        manager = parent.newSubManager();
        manager.setName("djl-amp loss scaler device state");
        state =
                new DeviceScaleState(
                        start.getScale(),
                        start.getGrowthTracker(),
                        start.getOverflowsSinceChange(),
                        start.getSkippedSteps(),
                        manager,
                        device);
        scale = state.getScale().reshape(new Shape());
        scale.attach(manager);
        one = manager.create(1f);
        collapses = manager.zeros(new Shape(1), DataType.FLOAT32);
        overflowRun = manager.zeros(new Shape(1), DataType.FLOAT32);
        overflowRunPeak = manager.zeros(new Shape(1), DataType.FLOAT32);
    }

    /** Every array of the state, the scale's view left out (its storage is the state's). */
    void arrays(List<? super NDArray> into) {
        into.add(state.getScale());
        into.add(state.getGrowthTracker());
        into.add(state.getOverflowsSinceChange());
        into.add(state.getSkippedSteps());
        into.add(state.getCollapsed());
        into.add(collapses);
        into.add(overflowRun);
        into.add(overflowRunPeak);
    }

    /** The scale, 0-dimensional FP32. */
    NDArray scale() {
        return scale;
    }

    /** 1/scale, computed on the device and owned by {@code stepManager}. */
    NDArray inverseScale(NDManager stepManager) {
        // an array, not a Number: DJL's rdiv(Number) leaks its scalar onto the manager
        NDArray inverse = one.div(scale);
        inverse.attach(stepManager);
        return inverse;
    }

    /**
     * Reads the whole state and {@code foundInf} on the host in one copy (one wait for the device),
     * then starts counting collapses and the longest overflow run again.
     */
    Reading read(AmpBackend backend, NDArray foundInf) {
        float[] values;
        try (NDManager scratch = manager.newSubManager()) {
            NDList parts = new NDList();
            for (NDArray a :
                    new NDArray[] {
                        state.getScale(),
                        state.getGrowthTracker(),
                        state.getOverflowsSinceChange(),
                        state.getSkippedSteps(),
                        collapses,
                        overflowRun,
                        overflowRunPeak
                    }) {
                NDArray asFloat = a.toType(DataType.FLOAT32, true);
                asFloat.attach(scratch);
                parts.add(asFloat);
            }
            NDArray flag = foundInf.reshape(1);
            flag.attach(scratch);
            parts.add(flag);
            NDArray packed = NDArrays.concat(parts);
            packed.attach(scratch);
            values = backend.readFloats(packed);
        }
        backend.zero(new NDList(collapses, overflowRunPeak));
        return new Reading(
                values[0],
                (int) values[1],
                (int) values[2],
                (long) values[3],
                values[4] != 0f,
                (int) values[5],
                (int) values[6],
                values[7] != 0f);
    }

    /**
     * A dynamic scale's update, decided on the device.
     *
     * @param countCollapse whether a collapse is left for the next read to report (the verdict is
     *     not on the host, so the host cannot predict it)
     */
    void updateDynamic(
            AmpBackend backend,
            NDArray foundInf,
            DynamicScaleSettings settings,
            boolean countCollapse) {
        backend.updateScaleWithHysteresis(state, foundInf, settings);
        if (countCollapse) {
            collapses.addi(state.getCollapsed());
        }
    }

    /** A fixed scale's update: counts the skip and the run of overflows (its failure). */
    void updateFixed(AmpBackend backend, NDArray foundInf) {
        try (NDManager scratch = manager.newSubManager()) {
            NDArray found = foundInf.neq(0f);
            found.attach(scratch);
            NDArray count = found.toType(DataType.INT64, false);
            count.attach(scratch);
            state.getSkippedSteps().addi(count.reshape(1));
            NDArray flag = found.toType(DataType.FLOAT32, false);
            flag.attach(scratch);
            // run = (run + 1) * found; peak = max(peak, run)
            overflowRun.addi(1f).muli(flag);
            NDArray peak = overflowRunPeak.maximum(overflowRun);
            peak.attach(scratch);
            backend.copy(new NDList(overflowRunPeak), new NDList(peak));
        }
    }

    /** Restarts the count of consecutive overflowing steps. */
    void resetOverflowRun(AmpBackend backend) {
        backend.zero(new NDList(overflowRun, overflowRunPeak));
    }

    /** Frees every array. */
    @Override
    public void close() {
        manager.close();
    }
}
