package io.github.djlamp.amp.spi;

/**
 * The settings of a dynamic loss scale's update on the device ({@link
 * AmpBackend#updateScaleWithHysteresis}): GradScaler's growth and backoff, plus a hysteresis and a
 * minimum and maximum scale. Validated where the user configures them, not here.
 */
public final class DynamicScaleSettings {

    private final double growthFactor;
    private final double backoffFactor;
    private final int growthInterval;
    private final int hysteresis;
    private final float minScale;
    private final float maxScale;

    /**
     * Creates the settings.
     *
     * @param growthFactor the factor applied after {@code growthInterval} clean steps
     * @param backoffFactor the factor applied when an overflow backs the scale off
     * @param growthInterval clean steps between growths
     * @param hysteresis overflows, counted since the scale last changed, that back it off
     * @param minScale the floor: a backoff below it is reported as a collapse instead
     * @param maxScale the ceiling: growth stops there
     */
    public DynamicScaleSettings(
            double growthFactor,
            double backoffFactor,
            int growthInterval,
            int hysteresis,
            float minScale,
            float maxScale) {
        this.growthFactor = growthFactor;
        this.backoffFactor = backoffFactor;
        this.growthInterval = growthInterval;
        this.hysteresis = hysteresis;
        this.minScale = minScale;
        this.maxScale = maxScale;
    }

    /**
     * Returns the factor applied after {@link #getGrowthInterval()} clean steps.
     *
     * @return the growth factor
     */
    public double getGrowthFactor() {
        return growthFactor;
    }

    /**
     * Returns the factor applied when an overflow backs the scale off.
     *
     * @return the backoff factor
     */
    public double getBackoffFactor() {
        return backoffFactor;
    }

    /**
     * Returns the number of consecutive clean steps after which the scale grows.
     *
     * @return the growth interval
     */
    public int getGrowthInterval() {
        return growthInterval;
    }

    /**
     * Returns how many overflows since the scale last changed back it off (1: every overflow).
     *
     * @return the hysteresis
     */
    public int getHysteresis() {
        return hysteresis;
    }

    /**
     * Returns the floor of the scale.
     *
     * @return the minimum scale
     */
    public float getMinScale() {
        return minScale;
    }

    /**
     * Returns the ceiling of the scale.
     *
     * @return the maximum scale
     */
    public float getMaxScale() {
        return maxScale;
    }
}
