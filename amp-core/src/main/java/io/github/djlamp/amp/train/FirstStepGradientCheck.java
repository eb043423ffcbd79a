package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.cast.internal.TrainingLink;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.internal.DjlSeam;
import io.github.djlamp.amp.scale.GradientSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * DJL's check, at a trainer's first {@code step()}, that backward reached the parameters, made
 * without its false alarm. DJL adds up every gradient with its sign and refuses the step when the
 * sum is exactly zero; but the gradients of a softmax classifier's weights sum to zero over its
 * classes, and in 16 bits the two halves of a two-class head cancel exactly. A model whose only
 * trainable layer is such a head (DJL's {@code TransferFreshFruit}: a frozen TorchScript base, a
 * {@code Linear}, softmax) then fails its first step, though every gradient is right. djl-amp turns
 * DJL's check off and asks instead whether any gradient is non-zero: the same one host read, once,
 * before the first update changes anything.
 *
 * <p>DJL's check also registers every parameter in the trainer's own parameter store, and {@code
 * step()} updates only the parameters registered there. A loop that runs its forward on a store of
 * its own ({@code net.forward(new ParameterStore(manager, false), ...)}, as d2l-java's seq2seq
 * chapters do) and calls {@code trainer.step()} is updated only through that side effect: with
 * DJL's check off, its parameters stayed as they were and the loss stood still, with no word. So
 * djl-amp takes the check over only where the first training forward of the wrapper ran on the
 * trainer's own store, which then holds what the forward reached; elsewhere DJL's check stays.
 */
final class FirstStepGradientCheck {

    /** DJL's own message, so that a program that caught it sees the same text. */
    static final String ALL_ZEROS =
            "Gradient values are all zeros, please call gradientCollector.backward() on"
                    + "your target NDArray (usually loss), before calling step() ";

    private static final Logger logger = LoggerFactory.getLogger(AmpSession.class);

    // set by the first training forward (a device's thread), read at every step's first update
    private volatile boolean pending;
    private Trainer awaiting;
    private boolean toldNoForward;

    /**
     * Takes the check over from {@code trainer} at the wrapper's first training forward, if that
     * runs on the trainer's own store ({@code link} tells). Where this DJL version keeps no such
     * flag, DJL's own check stays.
     */
    synchronized void takeOver(Trainer trainer, TrainingLink link) {
        pending = false;
        awaiting = trainer;
        link.onNextTrainingForward(store -> firstForward(trainer, store));
    }

    private synchronized void firstForward(Trainer trainer, ParameterStore store) {
        if (awaiting != trainer) {
            return;
        }
        awaiting = null;
        try {
            if (store == DjlSeam.parameterStore(trainer)) {
                DjlSeam.skipFirstGradientCheck(trainer);
                pending = true;
            }
        } catch (AmpException e) {
            pending = false;
        }
    }

    /**
     * At the step's first update: throws DJL's exception when every trainable parameter's gradient
     * on the trainer's first device is zero; afterwards does nothing.
     */
    void check(Trainer trainer, TrainableGradients trainable, TrainingLink link) {
        if (!toldNoForward && link.getTrainingForwardCount() == 0) {
            toldNoForward = true;
            logger.warn(
                    "djl-amp: trainer.step() updates parameters that no training forward of the"
                            + " MixedPrecisionBlock reached: the program called the block it"
                            + " wrapped itself, so that forward computed in fp32 and djl-amp did"
                            + " not see it. Call the wrapper instead: trainer.forward(...), or"
                            + " forward(...) on the block Amp.wrap returned (model.getBlock())");
        }
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
