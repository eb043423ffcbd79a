package io.github.djlamp.amp.scale;

import io.github.djlamp.amp.exception.AmpException;
import java.util.List;

/**
 * Thrown when overflows would push the loss scale below its minimum: gradients overflow even at a
 * tiny scale, so scaling cannot be what is wrong. Names the parameters whose gradients were
 * non-finite first, and says what to do.
 */
public class LossScaleCollapsedException extends AmpException {

    private static final long serialVersionUID = 1L;

    private final transient List<String> nonFiniteParameters;
    private final boolean lossNonFinite;

    /**
     * Creates the exception.
     *
     * @param minScale the floor that was reached
     * @param nonFiniteParameters the first parameters whose gradients were non-finite
     * @param lossNonFinite whether the unscaled loss itself was non-finite (true divergence)
     */
    public LossScaleCollapsedException(
            float minScale, List<String> nonFiniteParameters, boolean lossNonFinite) {
        this(minScale, nonFiniteParameters, lossNonFinite, where(nonFiniteParameters));
    }

    /**
     * Creates the exception with its own account of the gradients, for a collapse found after the
     * gradients of its overflowing steps were cleared (a loss scaler state kept on the device is
     * read on the host only every few steps).
     *
     * @param minScale the floor that was reached
     * @param nonFiniteParameters the parameters seen with non-finite gradients, empty for none
     * @param lossNonFinite whether the unscaled loss itself was non-finite (true divergence)
     * @param where a clause of the message: where those gradients were seen, or how to name them
     */
    public LossScaleCollapsedException(
            float minScale, List<String> nonFiniteParameters, boolean lossNonFinite, String where) {
        super(message(minScale, where, lossNonFinite));
        this.nonFiniteParameters = List.copyOf(nonFiniteParameters);
        this.lossNonFinite = lossNonFinite;
    }

    private static String where(List<String> names) {
        return names.isEmpty()
                ? "no parameter gradient was non-finite (the overflow was elsewhere)"
                : "gradients were non-finite first in " + String.join(", ", names);
    }

    private static String message(float minScale, String where, boolean lossNonFinite) {
        if (lossNonFinite) {
            return "Training diverged: the loss itself is Inf/NaN, so lowering the loss scale"
                    + " (now at its minimum "
                    + minScale
                    + ") cannot help; "
                    + where
                    + ". Lower the learning rate, check the data for NaNs, or run the model in"
                    + " fp32 to confirm.";
        }
        return "The loss scale would fall below its minimum "
                + minScale
                + ": gradients overflow even at this scale; "
                + where
                + ". Keep the blocks that own them in fp32 with a per-block override"
                + " (PrecisionPolicy.builder(...).overridePath(path, CastCategory.FP32)), use"
                + " bf16 where the hardware has it, or lower minScale if a scale below "
                + minScale
                + " is really wanted.";
    }

    /**
     * Returns the parameters whose gradients were non-finite on the last step, first ones first
     * (with the state on the device, on the last host-read step that saw an overflow).
     *
     * @return parameter names
     */
    public List<String> getNonFiniteParameters() {
        return nonFiniteParameters;
    }

    /**
     * Returns whether the loss itself was non-finite: divergence, not overflow.
     *
     * @return true when the unscaled loss was Inf or NaN
     */
    public boolean isLossNonFinite() {
        return lossNonFinite;
    }
}
