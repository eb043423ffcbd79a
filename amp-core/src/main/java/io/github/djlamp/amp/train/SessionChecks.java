package io.github.djlamp.amp.train;

import ai.djl.ndarray.NDArray;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;

/**
 * The order a session's callers must keep, and what to do when they do not: each rule throws {@link
 * IllegalStateException} for a verb out of order (Java's convention) and {@link AmpException} for a
 * trainer or loss djl-amp cannot work with, naming the call to make instead.
 */
final class SessionChecks {

    private SessionChecks() {}

    static void requireAttached(AttachedTrainer attached) {
        if (attached == null) {
            throw new IllegalStateException(
                    "The AMP session is not attached to a trainer yet: call"
                            + " AmpSession.of(trainer) (EasyTrain does this in onTrainingBegin)");
        }
    }

    static AmpException notConfigured() {
        return new AmpException(
                "This trainer was not configured for mixed precision: create it from"
                        + " Amp.configure(config, block)");
    }

    static void requireNoOpenTrainer(boolean anotherIsOpen) {
        if (anotherIsOpen) {
            throw new IllegalStateException(
                    "This AmpTrainingConfig already drives an open trainer, and one configuration"
                            + " holds the mixed precision state (loss scale, skipped steps) of one"
                            + " trainer at a time: close the first trainer before creating the"
                            + " next, or give each trainer its own Amp.configure(config, block)");
        }
    }

    static void requireBlock(Trainer trainer, MixedPrecisionBlock block) {
        if (trainer.getModel().getBlock() != block) {
            throw new AmpException(
                    "The trainer's model block is not the MixedPrecisionBlock this session was"
                            + " configured with: call model.setBlock(wrapped) before"
                            + " model.newTrainer(Amp.configure(config, wrapped))");
        }
    }

    static void requireNotScaledYet(NDArray loss) {
        if (AttachedTrainer.SCALED_LOSS_NAME.equals(loss.getName())) {
            throw new AmpException(
                    "This loss is already scaled for backward (trainer.getLoss() of a trainer made"
                            + " with Amp.configure scales it, and so does AmpSession.scale):"
                            + " scaling it again would multiply its gradients by the scale twice."
                            + " Pass it to backward as it is.");
        }
    }

    static void requireLossScaled(boolean scaled) {
        if (!scaled) {
            throw new IllegalStateException(
                    "No loss was scaled for this step's backward, so there is nothing to unscale:"
                            + " pass trainer.getLoss().evaluate(...) (or amp.scale(loss) of a Loss"
                            + " of your own) to backward before amp.step()");
        }
    }

    static void requireChecked(boolean checked) {
        if (!checked) {
            throw new IllegalStateException(
                    "The optimizer ran before djl-amp checked the gradients: with EasyTrain keep"
                            + " the AmpTrainingListener that Amp.configure adds; in a custom loop"
                            + " end each step with AmpSession.step() instead of trainer.step(),"
                            + " and where the loop clips or reads the gradients before it (a"
                            + " gradClipping), call amp.unscaleGradients() first: until then they"
                            + " are multiplied by the loss scale");
        }
    }
}
