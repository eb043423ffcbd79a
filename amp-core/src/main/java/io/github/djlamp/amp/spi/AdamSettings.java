package io.github.djlamp.amp.spi;

import io.github.djlamp.amp.AmpException;

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
    private final int beginNumUpdate;

    /**
     * Creates the settings.
     *
     * @param beta1 the first moment's decay
     * @param beta2 the second moment's decay
     * @param epsilon added to the root of the second moment
     * @param weightDecay the weight decay
     * @param decoupled true for AdamW's decay ({@code w -= lr wd w} before the update), false for
     *     Adam's L2 term added to the gradient
     * @param beginNumUpdate DJL's {@code beginNumUpdate}: the bias corrections use the step count
     *     {@code beginNumUpdate + applied steps}
     */
    public AdamSettings(
            float beta1,
            float beta2,
            float epsilon,
            float weightDecay,
            boolean decoupled,
            int beginNumUpdate) {
        if (beginNumUpdate < 0) {
            throw new AmpException(
                    "beginNumUpdate counts steps and cannot be negative, got " + beginNumUpdate);
        }
        this.beta1 = beta1;
        this.beta2 = beta2;
        this.epsilon = epsilon;
        this.weightDecay = weightDecay;
        this.decoupled = decoupled;
        this.beginNumUpdate = beginNumUpdate;
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

    /**
     * Returns DJL's offset of the step count used by the bias corrections.
     *
     * @return beginNumUpdate
     */
    public int getBeginNumUpdate() {
        return beginNumUpdate;
    }
}
