package io.github.djlamp.amp.doctor;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.initializer.Initializer;

/**
 * Deterministic values in [-scale, scale): the fractional parts of multiples of the golden ratio's
 * inverse, shifted by an offset so that two arrays differ. Made on the host, with no draw from the
 * engine's random generator, so the reference sees exactly what the kernel sees.
 */
final class HostValues implements Initializer {

    private static final double STEP = 0.6180339887498949;

    private final double scale;
    private final double offset;

    HostValues(double scale, double offset) {
        this.scale = scale;
        this.offset = offset;
    }

    float[] values(long size) {
        float[] values = new float[Math.toIntExact(size)];
        for (int i = 0; i < values.length; i++) {
            double t = (i + 1) * STEP + offset;
            values[i] = (float) ((t - Math.floor(t)) * 2 * scale - scale);
        }
        return values;
    }

    /** {@inheritDoc} */
    @Override
    public NDArray initialize(NDManager manager, Shape shape, DataType dataType) {
        return manager.create(values(shape.size()), shape).toType(dataType, false);
    }
}
