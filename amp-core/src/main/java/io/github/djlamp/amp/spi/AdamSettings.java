package io.github.djlamp.amp.spi;

/**
 * The hyper-parameters of one fused Adam or AdamW step, as DJL's {@code Adam} and {@code AdamW}
 * define them, apart from the learning rate ({@link LearningRate}).
 */
public final class AdamSettings {

    private final float beta1;
    private final float beta2;
    private final float epsilon;
    private final float weightDecay;
    private final boolean decoupled;

    /**
     * Creates the settings.
     *
     * @param beta1 the first moment's decay
     * @param beta2 the second moment's decay
     * @param epsilon added to the root of the second moment
     * @param weightDecay the weight decay
     * @param decoupled true for AdamW's decay ({@code w -= lr wd w} before the update), false for
     *     Adam's L2 term added to the gradient
     */
    public AdamSettings(
            float beta1, float beta2, float epsilon, float weightDecay, boolean decoupled) {
        this.beta1 = beta1;
        this.beta2 = beta2;
        this.epsilon = epsilon;
        this.weightDecay = weightDecay;
        this.decoupled = decoupled;
    }

    /**
     * Returns the first moment's decay.
     *
     * @return beta1
     */
    public float getBeta1() {
        return beta1;
    }

    /**
     * Returns the second moment's decay.
     *
     * @return beta2
     */
    public float getBeta2() {
        return beta2;
    }

    /**
     * Returns the epsilon added to the root of the second moment.
     *
     * @return epsilon
     */
    public float getEpsilon() {
        return epsilon;
    }

    /**
     * Returns the weight decay.
     *
     * @return the weight decay
     */
    public float getWeightDecay() {
        return weightDecay;
    }

    /**
     * Returns whether the weight decay is AdamW's decoupled decay.
     *
     * @return true for AdamW
     */
    public boolean isDecoupled() {
        return decoupled;
    }
}
