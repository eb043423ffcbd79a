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
