package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.spi.UpdateCounter;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * DJL's update count for fused steps, kept on the device ({@link UpdateCounter}): a slot per
 * parameter counting the steps applied to it, the mask of the slots a launch trains, and the count
 * itself. The mask goes to the device only when the set of trained parameters changes (a layer
 * frozen, unfrozen or added).
 */
final class FusedUpdateCount {

    private final int beginNumUpdate;
    private final Map<String, Integer> slots = new HashMap<>();
    private BitSet lastTrained;
    private NDArray perParameter;
    private NDArray trained;
    private NDArray count;

    FusedUpdateCount(int beginNumUpdate) {
        this.beginNumUpdate = beginNumUpdate;
    }

    /**
     * Returns the counter for a launch over {@code parameterIds}, growing the slots and sending a
     * new mask when they differ from the last launch's.
     *
     * @param parameterIds the parameters the launch updates
     * @param owner the manager that keeps the arrays (the model's)
     * @param device the weights' device
     * @return the counter
     */
    UpdateCounter forLaunch(List<String> parameterIds, NDManager owner, Device device) {
        BitSet now = new BitSet();
        for (String id : parameterIds) {
            now.set(slots.computeIfAbsent(id, k -> slots.size()));
        }
        if (count == null) {
            count = owner.zeros(new Shape(), DataType.FLOAT64, device);
        }
        long capacity = perParameter == null ? 0 : perParameter.size();
        if (slots.size() > capacity) {
            long grown = Math.max(slots.size(), 2 * capacity);
            NDArray zeros = owner.zeros(new Shape(grown - capacity), DataType.FLOAT64, device);
            NDArray counts = perParameter == null ? zeros : perParameter.concat(zeros);
            if (perParameter != null) {
                perParameter.close();
                zeros.close();
            }
            perParameter = counts;
            lastTrained = null;
        }
        if (!now.equals(lastTrained)) {
            double[] mask = new double[Math.toIntExact(perParameter.size())];
            now.stream().forEach(slot -> mask[slot] = 1.0);
            if (trained != null) {
                trained.close();
            }
            // made on the device directly, owned like the counts
            try (NDManager onDevice = owner.newSubManager(device)) {
                trained = onDevice.create(mask);
                trained.attach(owner);
            }
            lastTrained = now;
        }
        return new UpdateCounter(perParameter, trained, count, beginNumUpdate);
    }

    /** DJL's update count on the device, or null before the first launch. */
    NDArray count() {
        return count;
    }
}
