package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.spi.AmpBackend;
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

    private static final float TWO_TO_24 = 16_777_216f;

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

    /**
     * Adds the device arrays a launch reads and updates (each parameter's count, the mask of the
     * trained ones, DJL's count), none before the first launch.
     */
    void arrays(List<? super NDArray> into) {
        if (count != null) {
            into.add(perParameter);
            into.add(trained);
            into.add(count);
        }
    }

    /**
     * Reads each parameter's applied steps on the host (one read), by parameter id.
     *
     * @param backend the engine layer that reads
     * @return the counts of the parameters that have a slot
     */
    Map<String, Long> appliedSteps(AmpBackend backend) {
        Map<String, Long> result = new HashMap<>();
        if (perParameter != null) {
            float[] values = backend.readFloats(perParameter);
            slots.forEach((id, slot) -> result.put(id, (long) values[slot]));
        }
        return result;
    }

    /**
     * Sets the counts from a saved state; before the first launch only.
     *
     * @param appliedSteps each parameter's applied steps, by parameter id
     * @param djlCount DJL's update count
     * @param owner the manager that keeps the arrays (the model's)
     * @param device the weights' device
     */
    /** Forgets a restored count that no step has used, so that a state can be loaded again. */
    void forget() {
        if (count != null) {
            count.close();
            count = null;
        }
        if (perParameter != null) {
            perParameter.close();
            perParameter = null;
        }
        slots.clear();
    }

    void restore(Map<String, Long> appliedSteps, long djlCount, NDManager owner, Device device) {
        if (count != null) {
            throw new IllegalStateException("the update count is restored before the first step");
        }
        double[] counts = new double[appliedSteps.size()];
        appliedSteps.forEach(
                (id, steps) -> {
                    int slot = slots.size();
                    slots.put(id, slot);
                    counts[slot] = steps;
                });
        try (NDManager onDevice = owner.newSubManager(device)) {
            if (counts.length > 0) {
                perParameter = onDevice.create(counts);
                perParameter.attach(owner);
            }
            // a copy the engine owns: on the CPU create(...) wraps a Java buffer that libtorch
            // does not copy, freed once its array closes, and the fused step writes the count in
            // place; a view of it outlived the array (RestoredUpdateCountTest)
            count = onDevice.create((double) djlCount).duplicate();
            count.attach(owner);
        }
    }

    /**
     * Reads a device FLOAT64 count exactly: a float holds whole numbers up to 2^24 only, so the
     * count is read as two such parts.
     *
     * @param backend the engine layer that reads
     * @param deviceCount a one-element FLOAT64 array
     * @return the count
     */
    static long read(AmpBackend backend, NDArray deviceCount) {
        try (NDManager scope = deviceCount.getManager().newSubManager()) {
            NDArray count = deviceCount.duplicate();
            count.attach(scope);
            NDArray high = count.div(TWO_TO_24).floor();
            NDArray low = count.sub(high.mul(TWO_TO_24));
            float[] parts = backend.readFloats(high.reshape(1).concat(low.reshape(1)));
            return (long) parts[0] * (long) TWO_TO_24 + (long) parts[1];
        }
    }
}
