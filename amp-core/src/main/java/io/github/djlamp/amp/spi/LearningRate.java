package io.github.djlamp.amp.spi;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.DataType;
import io.github.djlamp.amp.exception.AmpException;

/**
 * The learning rate of a fused optimizer step: a constant, or one value per DJL update count,
 * looked up on the device by the step's own count ({@link UpdateCounter}). DJL's optimizers do not
 * count a skipped step, and once skips are decided on the device only the device knows the count.
 */
public final class LearningRate {

    private final float fixedValue;
    private final NDArray values;
    private final long firstCount;

    private LearningRate(float fixedValue, NDArray values, long firstCount) {
        this.fixedValue = fixedValue;
        this.values = values;
        this.firstCount = firstCount;
    }

    /**
     * A learning rate that does not change.
     *
     * @param value the rate
     * @return the learning rate
     */
    public static LearningRate fixed(float value) {
        return new LearningRate(value, null, 0);
    }

    /**
     * A learning rate that depends on DJL's update count: {@code values[i]} is the rate of the
     * update whose count is {@code firstCount + i}. Counts outside the table take its nearest end;
     * the caller keeps the table ahead of the count.
     *
     * @param values a one-dimensional FLOAT32 array on the weights' device
     * @param firstCount the update count that {@code values[0]} is for
     * @return the learning rate
     */
    public static LearningRate perUpdateCount(NDArray values, long firstCount) {
        if (values.getDataType() != DataType.FLOAT32
                || values.getShape().dimension() != 1
                || values.size() == 0) {
            throw new AmpException(
                    "A per-step learning rate needs a non-empty one-dimensional FLOAT32 array,"
                            + " got "
                            + values.getDataType()
                            + " "
                            + values.getShape());
        }
        if (firstCount < 0) {
            throw new AmpException(
                    "firstCount counts updates and cannot be negative, got " + firstCount);
        }
        return new LearningRate(Float.NaN, values, firstCount);
    }

    /**
     * Returns whether the rate is a constant.
     *
     * @return true for {@link #fixed(float)}
     */
    public boolean isFixed() {
        return values == null;
    }

    /**
     * Returns the constant rate.
     *
     * @return the rate; NaN for a per-step rate
     */
    public float getFixedValue() {
        return fixedValue;
    }

    /**
     * Returns the per-step rates.
     *
     * @return the device array, or null for a fixed rate
     */
    public NDArray getValues() {
        return values;
    }

    /**
     * Returns the update count that the first per-step rate is for.
     *
     * @return the count, 0 for a fixed rate
     */
    public long getFirstCount() {
        return firstCount;
    }
}
