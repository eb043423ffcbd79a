package io.github.djlamp.amp.cast.internal;

import io.github.djlamp.amp.policy.Checkpointing;

/**
 * The activation checkpointing of a {@code MixedPrecisionBlock}, as the trainer glue drives it: the
 * setting applied at configuration, and the recomputation of the segments the training forward
 * passes ran without recording, after backward and before the gradients are reduced and checked.
 */
public interface CheckpointControl {

    /**
     * Applies a setting to the block's tree; the next forward pass builds the segments.
     *
     * @param checkpointing the setting
     * @throws io.github.djlamp.amp.exception.AmpException naming the fix when it cannot apply
     */
    void apply(Checkpointing checkpointing);

    /**
     * Returns the setting in force.
     *
     * @return the setting, {@link Checkpointing#none()} by default
     */
    Checkpointing getSetting();

    /**
     * Returns what is checkpointed, for the start-of-training line.
     *
     * @return a description, or null when nothing is
     */
    String describe();

    /**
     * Returns what the checkpointed segments of the first training step kept and what their layers
     * made and dropped; null until a step with segments has been recomputed.
     *
     * @return the count of the first step
     */
    SavingEstimate getSavingEstimate();

    /**
     * What the checkpointed segments of one step kept and dropped, counted from the shapes and data
     * types of the arrays (never a value).
     *
     * @param segmentRuns how many segment runs the step's forward passes made
     * @param keptBytes the bytes of the segments' inputs and outputs, held until the recomputation
     * @param droppedBytes the bytes of the activations the segments' layers made and did not keep
     *     (their outputs, the casts of their inputs, the internals of blocks with their own
     *     forward); without checkpointing backward keeps the part of them it reads
     * @param largestSegmentBytes the most any one segment dropped: what its recomputation makes
     *     again while it runs
     */
    record SavingEstimate(
            int segmentRuns, long keptBytes, long droppedBytes, long largestSegmentBytes) {

        /**
         * Returns how much less a step holds through backward at most: what the segments dropped
         * but for the one segment the recomputation holds at a time. Less in practice, where
         * backward would not have kept every activation (a BatchNorm's output a ReLU consumes).
         *
         * @return the bytes
         */
        public long upperBoundSavingBytes() {
            return droppedBytes - largestSegmentBytes;
        }
    }

    /**
     * Returns whether forward passes left segments to recompute.
     *
     * @return whether {@link #recompute()} has work
     */
    boolean hasPending();

    /**
     * Recomputes the segments the forward passes since the last call ran, the last first, and
     * back-propagates through them: afterwards every gradient is where an uncheckpointed backward
     * puts it.
     */
    void recompute();

    /** Forgets the segments recorded since the last recomputation (their gradients are dropped). */
    void discard();

    /**
     * Returns how many segment runs were recomputed so far.
     *
     * @return the count
     */
    long getRecomputedSegments();
}
