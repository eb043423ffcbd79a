package io.github.djlamp.amp.scale;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The gradients of one step, every device's copy of every parameter, grouped by replica (the index
 * of the device in the trainer's device list): what the fused check must cover so that one Inf on
 * any device skips the step on all of them.
 */
public final class GradientSet {

    private final Map<Integer, NDList> byReplica = new LinkedHashMap<>();
    private final List<String> names = new ArrayList<>();
    private final List<NDArray> gradients = new ArrayList<>();

    /** Creates an empty set. */
    public GradientSet() {}

    /**
     * Adds the gradient of one parameter on the first (or only) device.
     *
     * @param parameterName the parameter's name, for messages
     * @param gradient the gradient array
     * @return this set
     */
    public GradientSet add(String parameterName, NDArray gradient) {
        return add(parameterName, 0, gradient);
    }

    /**
     * Adds one replica's gradient of one parameter.
     *
     * @param parameterName the parameter's name, for messages
     * @param replica the index of the gradient's device among the trainer's devices
     * @param gradient the gradient array, on that device
     * @return this set
     * @throws IllegalArgumentException when a replica's gradients are not all on one device
     */
    public GradientSet add(String parameterName, int replica, NDArray gradient) {
        NDList group = byReplica.computeIfAbsent(replica, r -> new NDList());
        if (!group.isEmpty() && !group.get(0).getDevice().equals(gradient.getDevice())) {
            throw new IllegalArgumentException(
                    "Replica "
                            + replica
                            + " holds gradients on "
                            + group.get(0).getDevice()
                            + " and "
                            + gradient.getDevice()
                            + "; give each device its own replica index");
        }
        group.add(gradient);
        names.add(parameterName);
        gradients.add(gradient);
        return this;
    }

    /**
     * Returns the gradients grouped by replica, in the order replicas were first seen.
     *
     * @return replica index to gradients
     */
    public Map<Integer, NDList> byReplica() {
        return Collections.unmodifiableMap(byReplica);
    }

    /**
     * Returns whether there are no gradients.
     *
     * @return true when empty
     */
    public boolean isEmpty() {
        return gradients.isEmpty();
    }

    /**
     * Returns the names of the first {@code limit} parameters whose gradients hold Inf or NaN.
     * Checks every gradient on its device and reads the answers back to the host at once (one
     * read): for error reports, not for the training hot path.
     *
     * @param limit the most names to return
     * @return the names, in the order added (a parameter on several devices is named once)
     */
    public List<String> nonFinite(int limit) {
        List<Integer> live = new ArrayList<>();
        for (int i = 0; i < gradients.size(); i++) {
            if (!gradients.get(i).isReleased()) {
                live.add(i); // a released one's step is over: nothing left to name
            }
        }
        List<String> result = new ArrayList<>();
        if (live.isEmpty()) {
            return result;
        }
        NDArray first = gradients.get(live.get(0));
        boolean[] finite;
        try (NDManager scratch = first.getManager().newSubManager()) {
            NDList flags = new NDList();
            for (int i : live) {
                NDArray asFloat = gradients.get(i).toType(DataType.FLOAT32, true);
                asFloat.attach(scratch);
                // x - x is 0 for finite x and NaN for Inf and NaN
                NDArray flag = asFloat.sub(asFloat).eq(0).all();
                flags.add(flag.toDevice(first.getDevice(), false));
            }
            finite = NDArrays.stack(flags).toBooleanArray();
        }
        for (int k = 0; k < finite.length && result.size() < limit; k++) {
            String name = names.get(live.get(k));
            if (!finite[k] && !result.contains(name)) {
                result.add(name);
            }
        }
        return result;
    }
}
