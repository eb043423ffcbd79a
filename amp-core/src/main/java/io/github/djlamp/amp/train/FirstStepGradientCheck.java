package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.internal.DjlSeam;
import io.github.djlamp.amp.scale.GradientSet;

/**
 * DJL's check, at a trainer's first {@code step()}, that backward reached the parameters, made
 * without its false alarm. DJL adds up every gradient with its sign and refuses the step when the
 * sum is exactly zero; but the gradients of a softmax classifier's weights sum to zero over its
 * classes, and in 16 bits the two halves of a two-class head cancel exactly. A model whose only
 * trainable layer is such a head (DJL's {@code TransferFreshFruit}: a frozen TorchScript base, a
 * {@code Linear}, softmax) then fails its first step, though every gradient is right. djl-amp turns
 * DJL's check off when it attaches and asks instead whether any gradient is non-zero: the same one
 * host read, once, before the first update changes anything.
 */
final class FirstStepGradientCheck {

    /** DJL's own message, so that a program that caught it sees the same text. */
    static final String ALL_ZEROS =
            "Gradient values are all zeros, please call gradientCollector.backward() on"
                    + "your target NDArray (usually loss), before calling step() ";

    private boolean pending;

    /**
     * Takes the check over from {@code trainer}. Where this DJL version keeps no such flag, DJL's
     * own check stays.
     */
    void takeOver(Trainer trainer) {
        try {
            DjlSeam.skipFirstGradientCheck(trainer);
            pending = true;
        } catch (AmpException e) {
            pending = false;
        }
    }

    /**
     * At the step's first update: throws DJL's exception when every trainable parameter's gradient
     * on the trainer's first device is zero; afterwards does nothing.
     */
    void check(Trainer trainer, TrainableGradients trainable) {
        if (!pending) {
            return;
        }
        try (NDManager scratch = trainer.getManager().newSubManager()) {
            GradientSet gradients =
                    trainable.collect(new Device[] {trainer.getDevices()[0]}, scratch);
            NDList magnitudes = new NDList();
            for (NDList replica : gradients.byReplica().values()) {
                for (NDArray gradient : replica) {
                    magnitudes.add(gradient.abs().sum());
                }
            }
            if (magnitudes.isEmpty()) {
                throw new IllegalStateException(
                        "No parameter of the model requires a gradient, so trainer.step() has"
                                + " nothing to update: leave at least one parameter trainable"
                                + " (Parameter.freeze(false) or Block.freezeParameters(false))");
            }
            // a sum of magnitudes is zero only when every value is: no sign cancels
            float total = NDArrays.stack(magnitudes).sum().getFloat();
            if (total == 0f) {
                throw new IllegalStateException(ALL_ZEROS);
            }
        }
        pending = false;
    }
}
