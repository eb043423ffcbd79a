package io.github.djlamp.amp.cast;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterServer;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;

/**
 * The parameter store one forward pass of a {@link MixedPrecisionBlock} hands down its shadow tree:
 * the trainer's own store, plus the step's casting context. Low-precision stages read WEIGHT and
 * BIAS parameters through it, cast to the compute precision; every other stage reads the trainer's
 * store directly.
 */
final class CastingParameterStore extends ParameterStore {

    private final ParameterStore delegate;
    private final AmpBackend backend;
    private final WeightCastCache cache;
    private final Precision computePrecision;
    private final MemoryLayout lowLayout;
    private final NDManager stepManager;

    CastingParameterStore(
            ParameterStore delegate,
            AmpBackend backend,
            WeightCastCache cache,
            Precision computePrecision,
            MemoryLayout lowLayout,
            NDManager stepManager) {
        super(delegate.getManager(), false);
        this.delegate = delegate;
        this.backend = backend;
        this.cache = cache;
        this.computePrecision = computePrecision;
        this.lowLayout = lowLayout;
        this.stepManager = stepManager;
    }

    ParameterStore delegate() {
        return delegate;
    }

    /** Casts floating inputs of a low-precision stage to the compute precision and layout. */
    NDList toLow(NDList arrays) {
        return castFloating(arrays, computePrecision, lowLayout);
    }

    /** Casts floating arrays to contiguous fp32, safe for any DJL operation. */
    NDList toFp32(NDList arrays) {
        return castFloating(arrays, Precision.FP32, MemoryLayout.CONTIGUOUS);
    }

    /** Casts every floating array that is not already {@code target}; others pass unchanged. */
    private NDList castFloating(NDList arrays, Precision target, MemoryLayout layout) {
        NDList result = new NDList(arrays.size());
        for (NDArray array : arrays) {
            Precision current = backend.precisionOf(array);
            if (current == null || current == target) {
                result.add(array);
            } else {
                NDArray cast = backend.cast(array, target, layout, stepManager);
                cast.setName(array.getName());
                result.add(cast);
            }
        }
        return result;
    }

    /** {@inheritDoc} */
    @Override
    public NDArray getValue(Parameter parameter, Device device, boolean training) {
        NDArray master = delegate.getValue(parameter, device, training);
        if (master == null) {
            return null;
        }
        Parameter.Type type = parameter.getType();
        if (type == Parameter.Type.WEIGHT || type == Parameter.Type.BIAS) {
            return training
                    ? cache.get(parameter, master, computePrecision, lowLayout, stepManager)
                    : cache.cast(master, computePrecision, lowLayout, stepManager);
        }
        return master;
    }

    /** {@inheritDoc} */
    @Override
    public NDManager getManager() {
        return delegate.getManager();
    }

    /** {@inheritDoc} */
    @Override
    public void setParameterServer(ParameterServer parameterServer, Device[] devices) {
        delegate.setParameterServer(parameterServer, devices);
    }

    /** {@inheritDoc} */
    @Override
    public void updateAllParameters() {
        delegate.updateAllParameters();
    }

    /** {@inheritDoc} */
    @Override
    public void sync() {
        delegate.sync();
    }
}
