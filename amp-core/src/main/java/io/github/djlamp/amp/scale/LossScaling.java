package io.github.djlamp.amp.scale;

import java.util.Objects;

/**
 * How the loss is scaled: not at all, by a fixed factor, or dynamically with PyTorch GradScaler's
 * semantics and the options PyTorch users ask for (hysteresis, minimum and maximum scale).
 *
 * <p>Immutable; every invalid setting is rejected when it is configured, with a message naming the
 * setting, the value and what is allowed.
 */
public final class LossScaling {

    /** The kinds of loss scaling. */
    public enum Mode {
        /** No scaling and no overflow check (bf16 and fp32 need none). */
        NONE,
        /** A constant scale; steps with non-finite gradients are skipped, the scale never moves. */
        STATIC,
        /** GradScaler's dynamic scale. */
        DYNAMIC
    }

    /** GradScaler's initial scale, 2^16. */
    public static final float DEFAULT_INIT_SCALE = 65536f;

    /** GradScaler's growth factor. */
    public static final double DEFAULT_GROWTH_FACTOR = 2.0;

    /** GradScaler's backoff factor. */
    public static final double DEFAULT_BACKOFF_FACTOR = 0.5;

    /** GradScaler's growth interval: clean steps between growths. */
    public static final int DEFAULT_GROWTH_INTERVAL = 2000;

    /** The default floor of the scale: reaching below it stops training with an explanation. */
    public static final float DEFAULT_MIN_SCALE = 1f;

    /** The default ceiling of the scale, 2^24: the scale never grows past it. */
    public static final float DEFAULT_MAX_SCALE = 16777216f;

    /**
     * The smallest scale accepted, 2^-24 (fp16's smallest subnormal): below it every scaled
     * gradient underflows to zero.
     */
    public static final float MIN_ALLOWED_SCALE = 0x1p-24f;

    /**
     * The largest scale accepted, 2^40: above it even fp32 gradients of ordinary losses overflow,
     * so every step would be skipped.
     */
    public static final float MAX_ALLOWED_SCALE = 0x1p40f;

    private static final LossScaling NONE = new LossScaling(new Builder(Mode.NONE));

    private final Mode mode;
    private final float initScale;
    private final double growthFactor;
    private final double backoffFactor;
    private final int growthInterval;
    private final int hysteresis;
    private final float minScale;
    private final float maxScale;

    private LossScaling(Builder builder) {
        mode = builder.mode;
        initScale = builder.initScale;
        growthFactor = builder.growthFactor;
        backoffFactor = builder.backoffFactor;
        growthInterval = builder.growthInterval;
        hysteresis = builder.hysteresis;
        minScale = builder.minScale;
        maxScale = builder.maxScale;
    }

    /**
     * Returns the configuration that does not scale the loss.
     *
     * @return no loss scaling
     */
    public static LossScaling none() {
        return NONE;
    }

    /**
     * Returns a dynamic scaler with GradScaler's defaults: init 2^16, growth 2.0 every 2000 clean
     * steps, backoff 0.5 and a skipped step on any Inf/NaN; plus djl-amp's floor 1 and ceiling
     * 2^24.
     *
     * @return the default dynamic loss scaling
     */
    public static LossScaling dynamic() {
        return dynamicBuilder().build();
    }

    /**
     * Returns a builder for dynamic loss scaling, starting from the defaults of {@link #dynamic()}.
     *
     * @return a builder
     */
    public static Builder dynamicBuilder() {
        return new Builder(Mode.DYNAMIC);
    }

    /**
     * Returns a constant scale: the loss is multiplied by {@code scale}, gradients divided by it,
     * and steps with non-finite gradients skipped.
     *
     * @param scale the constant scale, within [2^-24, 2^40]
     * @return static loss scaling
     * @throws IllegalArgumentException when {@code scale} lies outside [2^-24, 2^40]
     */
    public static LossScaling fixed(float scale) {
        Builder builder = new Builder(Mode.STATIC);
        builder.initScale(scale);
        builder.minScale = scale;
        builder.maxScale = scale;
        return builder.build();
    }

    /**
     * Returns the kind of scaling.
     *
     * @return the mode
     */
    public Mode getMode() {
        return mode;
    }

    /**
     * Returns whether the loss is scaled and gradients checked at all.
     *
     * @return false for {@link Mode#NONE}
     */
    public boolean isEnabled() {
        return mode != Mode.NONE;
    }

    /**
     * Returns the scale of the first step.
     *
     * @return the initial scale
     */
    public float getInitScale() {
        return initScale;
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
     * Returns how many overflows, counted since the last change of the scale, it takes to back the
     * scale off; 1 (GradScaler) backs off on every overflow. Every overflow skips its step.
     *
     * @return the hysteresis
     */
    public int getHysteresis() {
        return hysteresis;
    }

    /**
     * Returns the floor of the scale: an overflow that would take the scale below it stops training
     * with a {@link LossScaleCollapsedException}.
     *
     * @return the minimum scale
     */
    public float getMinScale() {
        return minScale;
    }

    /**
     * Returns the ceiling of the scale: growth stops there.
     *
     * @return the maximum scale
     */
    public float getMaxScale() {
        return maxScale;
    }

    /** {@inheritDoc} */
    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof LossScaling)) {
            return false;
        }
        LossScaling that = (LossScaling) o;
        return mode == that.mode
                && Float.compare(initScale, that.initScale) == 0
                && Double.compare(growthFactor, that.growthFactor) == 0
                && Double.compare(backoffFactor, that.backoffFactor) == 0
                && growthInterval == that.growthInterval
                && hysteresis == that.hysteresis
                && Float.compare(minScale, that.minScale) == 0
                && Float.compare(maxScale, that.maxScale) == 0;
    }

    /** {@inheritDoc} */
    @Override
    public int hashCode() {
        return Objects.hash(
                mode,
                initScale,
                growthFactor,
                backoffFactor,
                growthInterval,
                hysteresis,
                minScale,
                maxScale);
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return switch (mode) {
            case NONE -> "LossScaling[none]";
            case STATIC -> "LossScaling[static " + initScale + "]";
            case DYNAMIC ->
                    "LossScaling[dynamic init="
                            + initScale
                            + " growth="
                            + growthFactor
                            + " every "
                            + growthInterval
                            + " backoff="
                            + backoffFactor
                            + " hysteresis="
                            + hysteresis
                            + " min="
                            + minScale
                            + " max="
                            + maxScale
                            + "]";
        };
    }

    /** Builds dynamic {@link LossScaling}; every setter validates its argument at once. */
    public static final class Builder {

        private final Mode mode;
        private float initScale = DEFAULT_INIT_SCALE;
        private double growthFactor = DEFAULT_GROWTH_FACTOR;
        private double backoffFactor = DEFAULT_BACKOFF_FACTOR;
        private int growthInterval = DEFAULT_GROWTH_INTERVAL;
        private int hysteresis = 1;
        private float minScale = DEFAULT_MIN_SCALE;
        private float maxScale = DEFAULT_MAX_SCALE;

        private Builder(Mode mode) {
            this.mode = mode;
        }

        /**
         * Sets the scale of the first step (GradScaler's {@code init_scale}).
         *
         * @param scale within [2^-24, 2^40]
         * @return this builder
         * @throws IllegalArgumentException otherwise
         */
        public Builder initScale(float scale) {
            initScale =
                    LossScalingChecks.scale(
                            "initScale", scale, "GradScaler's default is 65536 (2^16)");
            return this;
        }

        /**
         * Sets the factor the scale grows by (GradScaler's {@code growth_factor}).
         *
         * @param factor finite and > 1
         * @return this builder
         * @throws IllegalArgumentException otherwise
         */
        public Builder growthFactor(double factor) {
            growthFactor = LossScalingChecks.growthFactor(factor);
            return this;
        }

        /**
         * Sets the factor the scale backs off by on overflow (GradScaler's {@code backoff_factor}).
         *
         * @param factor strictly between 0 and 1
         * @return this builder
         * @throws IllegalArgumentException otherwise
         */
        public Builder backoffFactor(double factor) {
            backoffFactor = LossScalingChecks.backoffFactor(factor);
            return this;
        }

        /**
         * Sets the number of consecutive clean steps between growths (GradScaler's {@code
         * growth_interval}).
         *
         * @param steps at least 1
         * @return this builder
         * @throws IllegalArgumentException otherwise
         */
        public Builder growthInterval(int steps) {
            growthInterval = LossScalingChecks.growthInterval(steps);
            return this;
        }

        /**
         * Sets how many overflows back the scale off (DeepSpeed's {@code hysteresis}): with n, the
         * first n-1 overflows since the scale last changed skip their step but keep the scale.
         *
         * @param overflows at least 1; 1 is GradScaler's behaviour
         * @return this builder
         * @throws IllegalArgumentException otherwise
         */
        public Builder hysteresis(int overflows) {
            hysteresis = LossScalingChecks.hysteresis(overflows);
            return this;
        }

        /**
         * Sets the floor of the scale.
         *
         * @param scale within [2^-24, 2^40]
         * @return this builder
         * @throws IllegalArgumentException otherwise
         */
        public Builder minScale(float scale) {
            minScale = LossScalingChecks.scale("minScale", scale, "the default is 1");
            return this;
        }

        /**
         * Sets the ceiling of the scale.
         *
         * @param scale within [2^-24, 2^40]
         * @return this builder
         * @throws IllegalArgumentException otherwise
         */
        public Builder maxScale(float scale) {
            maxScale = LossScalingChecks.scale("maxScale", scale, "the default is 16777216 (2^24)");
            return this;
        }

        /**
         * Builds the configuration.
         *
         * @return the loss scaling
         * @throws IllegalArgumentException when minScale &gt; maxScale, or the initial scale lies
         *     outside [minScale, maxScale]
         */
        public LossScaling build() {
            if (mode != Mode.NONE) {
                LossScalingChecks.bounds(initScale, minScale, maxScale);
            }
            return new LossScaling(this);
        }
    }
}
