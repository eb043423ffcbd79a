package io.github.djlamp.amp;

import io.github.djlamp.amp.scale.LossScaling;

/**
 * Training options of mixed precision beyond the policy: the loss scaling, and gradient
 * accumulation for {@code EasyTrain}.
 */
public final class AmpOptions {

    private static final AmpOptions DEFAULTS = builder().build();

    private final LossScaling lossScaling;
    private final int accumulationSteps;

    private AmpOptions(Builder builder) {
        lossScaling = builder.lossScaling;
        accumulationSteps = builder.accumulationSteps;
    }

    /**
     * Returns the defaults: the precision's own loss scaling, no accumulation.
     *
     * @return the default options
     */
    public static AmpOptions defaults() {
        return DEFAULTS;
    }

    /**
     * Returns a builder starting from the defaults.
     *
     * @return a builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Returns the loss scaling, or null for the precision's default (dynamic for fp16, none for
     * bf16 and fp32).
     *
     * @return the loss scaling or null
     */
    public LossScaling getLossScaling() {
        return lossScaling;
    }

    /**
     * Returns the number of batches whose gradients add up before one optimizer step.
     *
     * @return micro-batches per step, 1 for none
     */
    public int getAccumulationSteps() {
        return accumulationSteps;
    }

    /** Builds {@link AmpOptions}. */
    public static final class Builder {

        private LossScaling lossScaling;
        private int accumulationSteps = 1;

        private Builder() {}

        /**
         * Sets the loss scaling.
         *
         * @param scaling the loss scaling, or null for the precision's default
         * @return this builder
         */
        public Builder lossScaling(LossScaling scaling) {
            lossScaling = scaling;
            return this;
        }

        /**
         * Accumulates the gradients of {@code batches} consecutive batches into one optimizer step
         * with {@code EasyTrain}: the loss scale stays fixed across them, and an overflow in any of
         * them skips the step as a whole. The loss is not divided: divide it yourself if the step
         * should see the mean.
         *
         * @param batches at least 1; 1 steps after every batch
         * @return this builder
         * @throws IllegalArgumentException when {@code batches} is below 1
         */
        public Builder accumulationSteps(int batches) {
            if (batches < 1) {
                throw new IllegalArgumentException(
                        "accumulationSteps must be >= 1 batch, got "
                                + batches
                                + "; 1 steps the optimizer after every batch");
            }
            accumulationSteps = batches;
            return this;
        }

        /**
         * Builds the options.
         *
         * @return the options
         */
        public AmpOptions build() {
            return new AmpOptions(this);
        }
    }
}
