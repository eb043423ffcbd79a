package io.github.djlamp.bench.train;

import java.util.Arrays;
import java.util.Collection;

/** A sorted set of measurements with the order statistics the results report. */
public final class Samples {

    private final double[] sorted;

    /**
     * Creates the statistics of some values.
     *
     * @param values the measurements, at least one
     * @throws IllegalArgumentException when there are none
     */
    public Samples(double... values) {
        if (values.length == 0) {
            throw new IllegalArgumentException("No measurements: run at least one step");
        }
        sorted = values.clone();
        Arrays.sort(sorted);
    }

    /**
     * Creates the statistics of some values.
     *
     * @param values the measurements, at least one
     * @return the statistics
     */
    public static Samples of(Collection<? extends Number> values) {
        double[] array = new double[values.size()];
        int i = 0;
        for (Number v : values) {
            array[i++] = v.doubleValue();
        }
        return new Samples(array);
    }

    /**
     * Returns the number of measurements.
     *
     * @return the count
     */
    public int size() {
        return sorted.length;
    }

    /**
     * Returns a quantile, interpolated linearly between the closest ranks (type 7, as numpy's
     * default).
     *
     * @param q the quantile, 0 to 1
     * @return the value
     */
    public double quantile(double q) {
        if (q < 0 || q > 1) {
            throw new IllegalArgumentException("A quantile is between 0 and 1, got " + q);
        }
        double position = q * (sorted.length - 1);
        int below = (int) Math.floor(position);
        int above = Math.min(below + 1, sorted.length - 1);
        return sorted[below] + (position - below) * (sorted[above] - sorted[below]);
    }

    /**
     * Returns the median.
     *
     * @return the 0.5 quantile
     */
    public double median() {
        return quantile(0.5);
    }

    /**
     * Returns the first quartile.
     *
     * @return the 0.25 quantile
     */
    public double q1() {
        return quantile(0.25);
    }

    /**
     * Returns the third quartile.
     *
     * @return the 0.75 quantile
     */
    public double q3() {
        return quantile(0.75);
    }
}
