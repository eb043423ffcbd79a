package io.github.djlamp.amp.train;

import ai.djl.ndarray.NDManager;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.train.StepVerdict.Verdict;

/**
 * The gradient accumulation window of {@code EasyTrain}: the gradients of {@code steps} consecutive
 * batches add up into one optimizer step, checked and skipped as one. Inside the window the
 * optimizer leaves the gradients alone. A window the epoch ends inside is stepped then, so its
 * gradients do not add into the next epoch's first step; one still open when the trainer closes is
 * dropped.
 */
final class GradientAccumulation {

    private final AmpSession session;
    private final StepVerdict verdict;
    private final int steps;
    private int pendingBatches;

    /** A window of {@code steps} batches, at least 1 (1: every batch steps). */
    GradientAccumulation(AmpSession session, StepVerdict verdict, int steps) {
        this.session = session;
        this.verdict = verdict;
        this.steps = steps;
    }

    /**
     * {@code EasyTrain}'s moment after each batch's backward: counts the batch and, at the window's
     * end, unscales and checks the gradients and moves the scale (the optimizer step follows).
     */
    void afterBackward(NDManager batchManager) {
        pendingBatches++;
        if (pendingBatches < steps) {
            verdict.decide(Verdict.ACCUMULATE);
            return;
        }
        pendingBatches = 0;
        session.unscaleAndCheck(batchManager);
        session.update();
    }

    /**
     * Ends a window the epoch ended inside: its batches' gradients make one step, checked and
     * skipped like any other.
     */
    void flush(Trainer trainer) {
        if (!dropOpenWindow()) {
            return;
        }
        try (NDManager stepManager = trainer.getManager().newSubManager()) {
            session.unscaleAndCheck(stepManager);
        }
        trainer.step();
        session.update();
    }

    /**
     * Forgets the open window (its gradients are the caller's to clear).
     *
     * @return true when batches were waiting in it
     */
    boolean dropOpenWindow() {
        boolean pending = pendingBatches > 0;
        pendingBatches = 0;
        return pending;
    }
}
