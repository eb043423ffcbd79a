package io.github.djlamp.amp.scale;

import io.github.djlamp.amp.scale.LossScaler.Phase;

/**
 * Where a loss scaler's step stands, and the order its verbs must come in: scale any number of
 * times, check once, update once. A verb out of order throws {@link IllegalStateException} naming
 * the verb to call instead.
 */
final class StepPhase {

    private Phase phase = Phase.READY;

    /** The phase now. */
    Phase get() {
        return phase;
    }

    /** Whether the step's gradients were checked and the update is still to come. */
    boolean isUnscaled() {
        return phase == Phase.UNSCALED;
    }

    /** Before a loss is scaled: only while the step's gradients are still to come. */
    void requireScalable() {
        if (phase != Phase.READY) {
            throw new IllegalStateException(
                    "A loss was scaled after this step's gradients were already unscaled and"
                            + " checked (AmpSession.unscaleGradients()): finish the step with"
                            + " amp.step() first; to accumulate micro-batches, run every"
                            + " backward before amp.unscaleGradients() or amp.step()");
        }
    }

    /** Starts the check of the step's gradients, once a step. */
    void startCheck() {
        if (phase != Phase.READY) {
            throw new IllegalStateException(
                    "This step's gradients were already unscaled and checked"
                            + " (AmpSession.unscaleGradients()): call amp.step() now, which"
                            + " updates the weights or, on overflow, skips the update, instead of"
                            + " checking them again");
        }
        phase = Phase.UNSCALED;
    }

    /** Before the verdict is asked for: only between the check and the update. */
    void requireVerdict() {
        if (phase != Phase.UNSCALED) {
            throw new IllegalStateException(
                    "No overflow verdict for this step yet: call unscaleAndCheck(...) after"
                            + " backward and before the optimizer step (with EasyTrain, add"
                            + " AmpTrainingListener through Amp.configure)");
        }
    }

    /** Before the update: only after the check. */
    void requireChecked() {
        if (phase != Phase.UNSCALED) {
            throw new IllegalStateException(
                    "update() before unscaleAndCheck(...): check the step's gradients first");
        }
    }

    /**
     * Before a verb that must not split a step, such as restoring a state.
     *
     * @param verb the verb, for the message, e.g. {@code restore(...)}
     */
    void requireBetweenSteps(String verb) {
        if (phase != Phase.READY) {
            throw new IllegalStateException(verb + " in the middle of a step: call update() first");
        }
    }

    /** Ends the step, whether its update succeeded or threw. */
    void endStep() {
        phase = Phase.READY;
    }
}
