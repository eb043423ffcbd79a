package io.github.djlamp.amp.cast.checkpoint;

import ai.djl.nn.Block;
import io.github.djlamp.amp.cast.internal.CheckpointControl;
import io.github.djlamp.amp.policy.Checkpointing;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The checkpointing of one wrapped block: the plan resolved from the setting, the tape of segment
 * runs, and the rebuild of the shadow trees when the setting changes.
 */
public final class Checkpoints implements CheckpointControl {

    private static final Logger logger = LoggerFactory.getLogger(Checkpoints.class);

    private final Block original;
    private final Runnable rebuildShadows;
    private final CheckpointTape tape;
    private volatile CheckpointPlan plan = CheckpointPlan.NONE;
    private volatile SavingEstimate savingEstimate;

    /**
     * Makes the checkpointing of one wrapped block, checkpointing nothing until {@link #apply}.
     *
     * @param original the user's block
     * @param rebuildShadows builds every device's shadow tree again (the plan changed)
     */
    public Checkpoints(Block original, Runnable rebuildShadows) {
        this.original = original;
        this.rebuildShadows = rebuildShadows;
        this.tape = new CheckpointTape(() -> original.getParameters().values());
    }

    /** {@inheritDoc} */
    @Override
    public void apply(Checkpointing checkpointing) {
        CheckpointPlan resolved = CheckpointPlan.resolve(checkpointing, original);
        if (!resolved.setting().equals(plan.setting()) || resolved.isEnabled()) {
            tape.discard();
            plan = resolved;
            savingEstimate = null;
            if (resolved.isEnabled()) {
                tape.estimateSaving();
            }
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
                + " after backward, the last first: about one more forward pass of them per step. "
                + (savingEstimate != null
                        ? "First step: " + CheckpointSaving.describe(savingEstimate)
                        : "What it saves is logged after the first step, from the batch's shapes");
    }

    /** {@inheritDoc} */
    @Override
    public boolean hasPending() {
        return tape.hasPending();
    }

    /** {@inheritDoc} */
    @Override
    public void recompute() {
        CheckpointSaving saving = tape.recompute();
        if (saving != null) {
            savingEstimate = saving.estimate();
            logger.info(
                    "djl-amp: checkpointing={}, first step: {}",
                    plan.setting(),
                    CheckpointSaving.describe(savingEstimate));
        }
    }

    /** {@inheritDoc} */
    @Override
    public SavingEstimate getSavingEstimate() {
        return savingEstimate;
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

    /**
     * Returns the plan the shadow trees are built with.
     *
     * @return the plan in force
     */
    public CheckpointPlan plan() {
        return plan;
    }

    /**
     * Returns the tape the segments record on.
     *
     * @return the tape
     */
    public CheckpointTape tape() {
        return tape;
    }
}
