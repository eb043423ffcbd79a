package io.github.djlamp.amp.train;

import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import java.util.function.Supplier;

/**
 * What the session decided about the current step's gradients, and when that goes stale: a verdict
 * belongs to the training forward pass it was decided after, so evaluating the loss again (a
 * listener recording it) keeps it and the next training forward pass drops it. A custom loop that
 * unscaled the gradients itself holds the verdict until its {@code amp.step()}.
 */
final class StepVerdict {

    /** A step's verdict. */
    enum Verdict {
        /** Not checked since the last training forward pass. */
        UNCHECKED,
        /** Checked: the optimizer applies the step. */
        APPLY,
        /** Checked: the gradients overflowed and the optimizer skips the step. */
        SKIP,
        /** Checked, with the verdict left on the device (read only if someone asks). */
        ON_DEVICE,
        /** Inside a gradient accumulation window: the optimizer leaves the gradients to add up. */
        ACCUMULATE
    }

    private final MixedPrecisionBlock block;
    private Verdict verdict = Verdict.UNCHECKED;
    private long decidedAfterForward = -1;
    private boolean heldForStep;

    StepVerdict(MixedPrecisionBlock block) {
        this.block = block;
    }

    /** Records the verdict of the gradients of the current training forward pass. */
    void decide(Verdict decided) {
        verdict = decided;
        decidedAfterForward = block.getTrainingLink().getTrainingForwardCount();
    }

    /** The verdict, or UNCHECKED once a training forward pass has run since it was decided. */
    Verdict current() {
        if (verdict != Verdict.UNCHECKED
                && !heldForStep
                && block.getTrainingLink().getTrainingForwardCount() != decidedAfterForward) {
            verdict = Verdict.UNCHECKED;
        }
        return verdict;
    }

    /** Keeps the verdict whatever runs until {@link #reset()}: the custom loop's step is coming. */
    void holdForStep() {
        heldForStep = true;
    }

    /** Forgets the verdict: the next step checks its own gradients. */
    void reset() {
        verdict = Verdict.UNCHECKED;
        heldForStep = false;
    }

    /**
     * Whether the optimizer must skip this step ({@link AmpSession#isSkipping()}): a verdict left
     * on the device is read with {@code deviceRead} and stands until the next step's check.
     */
    boolean isSkipping(boolean scaling, Supplier<Verdict> deviceRead) {
        if (current() == Verdict.UNCHECKED && !scaling) {
            return false; // bf16 and fp32: a custom loop needs no scaler calls
        }
        requireChecked(scaling);
        if (current() == Verdict.ON_DEVICE) {
            decide(deviceRead.get());
        }
        return current() == Verdict.SKIP;
    }

    /** Throws when the optimizer runs before this step's gradients were checked under scaling. */
    void requireChecked(boolean scaling) {
        SessionChecks.requireChecked(current() != Verdict.UNCHECKED || !scaling);
    }

    /** Whether this step is known on the host to be skipped, without reading the device. */
    boolean isKnownSkip() {
        return current() == Verdict.SKIP;
    }

    /** Whether the optimizer step after this batch only accumulates gradients. */
    boolean isAccumulating() {
        return current() == Verdict.ACCUMULATE;
    }

    /** Whether the verdict was left on the device. */
    boolean isOnDevice() {
        return current() == Verdict.ON_DEVICE;
    }
}
