package io.github.djlamp.amp.spi;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

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
     * Creates the state from host values, on a sub-manager of {@code parent}; the collapse flag
     * starts at 0.
     *
     * @param scale the loss scale
     * @param growthTracker clean steps counted towards the next growth
     * @param overflowsSinceChange overflows counted towards the next backoff
     * @param skippedSteps steps skipped so far
     * @param parent the manager whose sub-manager owns the arrays
     * @param device the device of the arrays
     */
    public DeviceScaleState(
            float scale,
            int growthTracker,
            int overflowsSinceChange,
            long skippedSteps,
            NDManager parent,
            Device device) {
        manager = parent.newSubManager(device);
        this.scale = manager.create(new float[] {scale});
        this.growthTracker = manager.create(new int[] {growthTracker});
        this.overflowsSinceChange = manager.create(new int[] {overflowsSinceChange});
        this.skippedSteps = manager.create(new long[] {skippedSteps});
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
