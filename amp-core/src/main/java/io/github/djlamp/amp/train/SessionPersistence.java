package io.github.djlamp.amp.train;

import ai.djl.Model;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.scale.ScalerState;
import java.io.IOException;
import java.nio.file.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a session keeps beyond one trainer: the loss scaler's state in the model's properties
 * ({@value AmpSession#SCALER_STATE_PROPERTY}), restored when a trainer is attached and written at
 * every host read of the state, as {@code Model.save} begins and when the trainer closes; and the
 * optimizer's state in a file of its own ({@link OptimizerStateFile}).
 */
final class SessionPersistence {

    private static final Logger logger = LoggerFactory.getLogger(SessionPersistence.class);

    private final MixedPrecisionBlock block;
    private Model model;
    private LossScaler scaler;
    private LossScaling scaling;
    private boolean trainerOpen;

    /** The training forward count when an optimizer state was last loaded, -1 for never. */
    private long optimizerStateLoadedAt = -1;

    SessionPersistence(MixedPrecisionBlock block) {
        this.block = block;
    }

    /**
     * Follows a newly attached trainer's model and scaler: restores the scaler state saved with the
     * model when it was reached under the same loss scaling, and writes the current state into the
     * model's properties as each {@code Model.save} begins.
     */
    void attach(Model trainerModel, LossScaler trainerScaler, LossScaling trainerScaling) {
        model = trainerModel;
        scaler = trainerScaler;
        scaling = trainerScaling;
        trainerOpen = true;
        restoreScalerState();
        block.getTrainingLink().setBeforeSave(this::saveBeforeModelSave);
    }

    /** Stops writing before {@code Model.save}: the trainer closed with its state written. */
    void trainerClosed() {
        trainerOpen = false;
    }

    /** Puts the scaler's state into the model's properties (reads it when stale on the device). */
    void saveScalerState() {
        model.setProperty(
                AmpSession.SCALER_STATE_PROPERTY, scaler.state().withOrigin(scaling).toString());
    }

    /**
     * One host read when the state lives on the device and was not read since the last step, so
     * that a checkpoint written between the periodic reads is current. Divergence is still reported
     * at the reads, not here.
     */
    private void saveBeforeModelSave() {
        if (!trainerOpen || !scaling.isEnabled() || !scaler.isStateOnDevice()) {
            return; // the host path writes the state after every step
        }
        saveScalerState();
    }

    private void restoreScalerState() {
        String saved = model.getProperty(AmpSession.SCALER_STATE_PROPERTY);
        if (saved == null) {
            return;
        }
        ScalerState state = ScalerState.parse(saved);
        String mismatch = state.mismatch(scaling);
        if (mismatch == null) {
            scaler.restore(state);
            logger.info(
                    "djl-amp: restored the loss scaler state saved with model {}: {}",
                    model.getName(),
                    state);
        } else {
            logger.info(
                    "djl-amp: ignored the loss scaler state saved with model {} ({}): {}",
                    model.getName(),
                    state,
                    mismatch);
        }
    }

    void saveOptimizerState(AmpSession session, LossScalingOptimizer optimizer, Path file)
            throws IOException {
        OptimizerStateFile.save(session, requireOptimizer(optimizer), file);
    }

    /** Loads, and notes the load: until the next training forward, loading again is fine. */
    void loadOptimizerState(AmpSession session, LossScalingOptimizer optimizer, Path file)
            throws IOException {
        boolean untouchedSinceLoad =
                optimizerStateLoadedAt >= 0 && optimizerStateLoadedAt == forwardCount();
        OptimizerStateFile.load(session, requireOptimizer(optimizer), file, untouchedSinceLoad);
        optimizerStateLoadedAt = forwardCount();
    }

    private long forwardCount() {
        return block.getTrainingLink().getTrainingForwardCount();
    }

    private static LossScalingOptimizer requireOptimizer(LossScalingOptimizer optimizer) {
        if (optimizer == null) {
            throw new AmpException(
                    "This trainer's optimizer is not djl-amp's: configure the trainer with"
                            + " Amp.configure(...)");
        }
        return optimizer;
    }
}
