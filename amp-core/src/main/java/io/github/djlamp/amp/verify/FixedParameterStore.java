package io.github.djlamp.amp.verify;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import java.util.Map;

/**
 * A parameter store that hands a block given arrays for its parameters (a check's detached copies),
 * and a parameter's own array where it was given none.
 */
final class FixedParameterStore extends ParameterStore {

    private final Map<Parameter, NDArray> values;

    FixedParameterStore(NDManager manager, Map<Parameter, NDArray> values) {
        super(manager, false);
        this.values = values;
    }

    @Override
    public NDArray getValue(Parameter parameter, Device device, boolean training) {
        if (parameter == null) {
            // a layer built without a bias asks for it as null (DJL's ParameterStore answers
            // null too): ResNetV1's 3x3 and strided 1x1 convolutions
            return null;
        }
        NDArray value = values.get(parameter);
        return value != null ? value : parameter.getArray();
    }
}
