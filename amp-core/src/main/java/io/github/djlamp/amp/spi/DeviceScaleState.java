package io.github.djlamp.amp.spi;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.scale.ScalerState;

/**
 * The dynamic loss scale's state held on the device, for {@link
 * AmpBackend#updateScaleWithHysteresis}: scale (FP32), growth tracker and overflows since the last
 * change (INT32), skipped steps (INT64) and the collapse flag (FP32), each a one-element array on
 * the manager given at creation.
 */
public final class DeviceScaleState implements AutoCloseable {

    private final NDManager manager;
    private final NDArray scale;
    private final NDArray growthTracker;
    private final NDArray overflowsSinceChange;
    private final NDArray skippedSteps;
    private final NDArray collapsed;

    /**
     * Creates the state from a host snapshot, on a sub-manager of {@code parent}.
     *
     * @param state the values to start from
     * @param parent the manager whose sub-manager owns the arrays
     * @param device the device of the arrays
     */
    public DeviceScaleState(ScalerState state, NDManager parent, Device device) {
        manager = parent.newSubManager(device);
        scale = manager.create(new float[] {state.getScale()});
        growthTracker = manager.create(new int[] {state.getGrowthTracker()});
        overflowsSinceChange = manager.create(new int[] {state.getOverflowsSinceChange()});
        skippedSteps = manager.create(new long[] {state.getSkippedSteps()});
        collapsed = manager.zeros(new Shape(1), DataType.FLOAT32);
    }

    /**
     * Returns the scale.
     *
     * @return a one-element FP32 array
     */
    public NDArray getScale() {
        return scale;
    }

    /**
     * Returns the clean steps counted towards the next growth.
     *
     * @return a one-element INT32 array
     */
    public NDArray getGrowthTracker() {
        return growthTracker;
    }

    /**
     * Returns the overflows since the scale last changed.
     *
     * @return a one-element INT32 array
     */
    public NDArray getOverflowsSinceChange() {
        return overflowsSinceChange;
    }

    /**
     * Returns the number of skipped steps.
     *
     * @return a one-element INT64 array
     */
    public NDArray getSkippedSteps() {
        return skippedSteps;
    }

    /**
     * Returns 1 when the last update would have taken the scale below its minimum, else 0.
     *
     * @return a one-element FP32 array
     */
    public NDArray getCollapsed() {
        return collapsed;
    }

    /** Frees the arrays. */
    @Override
    public void close() {
        manager.close();
    }
}
