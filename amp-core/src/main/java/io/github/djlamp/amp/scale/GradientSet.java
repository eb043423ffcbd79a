package io.github.djlamp.amp.scale;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The gradients of one step, every device's copy of every parameter, grouped by device: what the
 * fused check must cover so that one Inf on any device skips the step on all of them.
 */
public final class GradientSet {

    private final Map<Device, NDList> byDevice = new LinkedHashMap<>();
    private final List<String> names = new ArrayList<>();
    private final List<NDArray> gradients = new ArrayList<>();

    /**
     * Adds one device's gradient of one parameter.
     *
     * @param parameterName the parameter's name, for messages
     * @param gradient the gradient array on its device
     * @return this set
     */
    public GradientSet add(String parameterName, NDArray gradient) {
        byDevice.computeIfAbsent(gradient.getDevice(), d -> new NDList()).add(gradient);
        names.add(parameterName);
        gradients.add(gradient);
        return this;
    }

    /**
     * Returns the gradients grouped by device, in the order devices were first seen.
     *
     * @return device to gradients
     */
    public Map<Device, NDList> byDevice() {
        return Collections.unmodifiableMap(byDevice);
    }

    /**
     * Returns every gradient, in the order added.
     *
     * @return the gradients
     */
    public List<NDArray> gradients() {
        return Collections.unmodifiableList(gradients);
    }

    /**
     * Returns the parameter name of each gradient, parallel to {@link #gradients()}.
     *
     * @return the names
     */
    public List<String> names() {
        return Collections.unmodifiableList(names);
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
     * Reads every gradient back to the host: for error reports, not for the training hot path.
     *
     * @param limit the most names to return
     * @return the names, in the order added (a parameter on several devices is named once)
     */
    public List<String> nonFinite(int limit) {
        List<String> result = new ArrayList<>();
        for (int i = 0; i < gradients.size() && result.size() < limit; i++) {
            NDArray g = gradients.get(i);
            boolean bad;
            try (NDManager scratch = g.getManager().newSubManager()) {
                NDArray asFloat = g.toType(DataType.FLOAT32, true);
                asFloat.attach(scratch);
                // x - x is 0 for finite x and NaN for Inf and NaN
                bad = !asFloat.sub(asFloat).eq(0).all().getBoolean();
            }
            if (bad && !result.contains(names.get(i))) {
                result.add(names.get(i));
            }
        }
        return result;
    }
}
