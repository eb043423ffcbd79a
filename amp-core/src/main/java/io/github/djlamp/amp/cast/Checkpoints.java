package io.github.djlamp.amp.cast;

import ai.djl.nn.Block;
import io.github.djlamp.amp.cast.internal.CheckpointControl;
import io.github.djlamp.amp.policy.Checkpointing;

/**
 * The checkpointing of one wrapped block: the plan resolved from the setting, the tape of segment
 * runs, and the rebuild of the shadow trees when the setting changes.
 */
final class Checkpoints implements CheckpointControl {

    private final Block original;
    private final Runnable rebuildShadows;
    private final CheckpointTape tape = new CheckpointTape();
    private volatile CheckpointPlan plan = CheckpointPlan.NONE;

    Checkpoints(Block original, Runnable rebuildShadows) {
        this.original = original;
        this.rebuildShadows = rebuildShadows;
    }

    /** {@inheritDoc} */
    @Override
    public void apply(Checkpointing checkpointing) {
        CheckpointPlan resolved = CheckpointPlan.resolve(checkpointing, original);
        if (!resolved.setting().equals(plan.setting()) || resolved.isEnabled()) {
            tape.discard();
            plan = resolved;
            rebuildShadows.run();
        }
    }

    /** {@inheritDoc} */
    @Override
    public Checkpointing getSetting() {
        return plan.setting();
    }

    /** {@inheritDoc} */
    @Override
    public String describe() {
        CheckpointPlan current = plan;
        if (!current.isEnabled()) {
            return null;
        }
        int segments = current.segmentCount();
        return "checkpointing="
                + current.setting()
                + ": "
                + segments
                + (segments == 1 ? " segment" : " segments")
                + " run without keeping their activations (only their inputs) and recomputed"
                + " after backward, the last first: about one more forward pass of them per step";
    }

    /** {@inheritDoc} */
    @Override
    public boolean hasPending() {
        return tape.hasPending();
    }

    /** {@inheritDoc} */
    @Override
    public void recompute() {
        tape.recompute();
    }

    /** {@inheritDoc} */
    @Override
    public void discard() {
        tape.discard();
    }

    /** {@inheritDoc} */
    @Override
    public long getRecomputedSegments() {
        return tape.getRecomputedSegments();
    }

    /** The plan the shadow trees are built with. */
    CheckpointPlan plan() {
        return plan;
    }

    /** The tape the segments record on. */
    CheckpointTape tape() {
        return tape;
    }
}
