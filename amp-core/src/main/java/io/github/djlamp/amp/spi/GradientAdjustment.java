package io.github.djlamp.amp.spi;

import io.github.djlamp.amp.exception.AmpException;

/**
 * What DJL's {@code Optimizer} does to every gradient before its update: {@code g * rescaleGrad},
 * then, when {@code clipGrad >= 0}, {@code min(g, clipGrad)}. (DJL's PyTorch engine clips from
 * above only; a fused step reproduces that.)
 */
public final class GradientAdjustment {

    /** Gradients used as they are: rescale 1, no clipping. */
    public static final GradientAdjustment NONE = new GradientAdjustment(1f, -1f);

    private final float rescale;
    private final float clip;

    /**
     * Creates the adjustment.
     *
     * @param rescale DJL's {@code rescaleGrad}, a finite factor
     * @param clip DJL's {@code clipGrad}: the largest value a gradient keeps, negative for none
     */
    public GradientAdjustment(float rescale, float clip) {
        if (!Float.isFinite(rescale) || Float.isNaN(clip)) {
            throw new AmpException(
                    "rescaleGrad must be finite and clipGrad a number, got rescaleGrad "
                            + rescale
                            + " and clipGrad "
                            + clip
                            + "; set them on DJL's optimizer builder");
        }
        this.rescale = rescale;
        this.clip = clip;
    }

    /**
     * Returns the factor every gradient is multiplied by.
     *
     * @return DJL's rescaleGrad
     */
    public float getRescale() {
        return rescale;
    }

    /**
     * Returns the largest value a gradient keeps.
     *
     * @return DJL's clipGrad, negative when gradients are not clipped
     */
    public float getClip() {
        return clip;
    }
}
