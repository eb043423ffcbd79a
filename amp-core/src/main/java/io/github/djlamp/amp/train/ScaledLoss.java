package io.github.djlamp.amp.train;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.training.loss.Loss;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.Arrays;
import java.util.Objects;

/**
 * The user's loss, scaled for backward.
 *
 * <p>{@code EasyTrain} passes what {@link #evaluate} returns to backward: its gradient is the loss
 * scale's, its value the true loss (see {@link AmpSession#scale}), so a custom loop that logs
 * {@code trainer.getLoss().evaluate(...)} logs the true loss. Every accumulator (the loss DJL
 * reports in its metrics, logs and training result) is delegated to the user's loss and stays
 * unscaled; a batch whose step djl-amp skipped is left out of the training accumulators, so its
 * non-finite loss does not read as divergence to DJL's listeners.
 */
public final class ScaledLoss extends Loss {

    /** The prefix of DJL's training accumulators ({@code EvaluatorTrainingListener.TRAIN_ALL}). */
    private static final String TRAINING_KEYS = "train/";

    private final Loss inner;
    private final AmpSession session;

    /**
     * Wraps a loss.
     *
     * @param inner the user's loss
     * @param session the AMP session that owns the scale
     */
    public ScaledLoss(Loss inner, AmpSession session) {
        super(inner.getName());
        this.inner = Objects.requireNonNull(inner, "inner");
        this.session = Objects.requireNonNull(session, "session");
    }

    /**
     * Returns the user's loss.
     *
     * @return the unscaled loss
     */
    public Loss getInner() {
        return inner;
    }

    /** {@inheritDoc} */
    @Override
    public NDArray evaluate(NDList labels, NDList predictions) {
        NDArray completed = session.takeLossOfCompletedStep(labels);
        if (completed != null) {
            return completed; // EasyTrain's step ran whole inside its forward: captured
        }
        return session.scale(inner.evaluate(labels, predictions));
    }

    /** {@inheritDoc} */
    @Override
    public void addAccumulator(String key) {
        inner.addAccumulator(key);
    }

    /** {@inheritDoc} */
    @Override
    public void updateAccumulator(String key, NDList labels, NDList predictions) {
        updateAccumulators(new String[] {key}, labels, predictions);
    }

    /** {@inheritDoc} */
    @Override
    public void updateAccumulators(String[] keys, NDList labels, NDList predictions) {
        if (isSkippedBatch() && !isFinite(labels, predictions)) {
            keys = withoutTrainingKeys(keys);
            if (keys.length == 0) {
                return;
            }
        }
        inner.updateAccumulators(keys, labels, predictions);
    }

    /**
     * Whether the batch being reported was skipped: a verdict left on the device is read, next to
     * DJL's own host read of the same loss for the report.
     */
    private boolean isSkippedBatch() {
        if (session.isStepDoneBeforeListeners()) {
            return session.wasCompletedStepSkipped();
        }
        StepVerdict verdict = session.verdict();
        return verdict.isOnDevice() ? session.isSkipping() : verdict.isKnownSkip();
    }

    /**
     * Whether a skipped batch's loss is finite: a step skipped because its scaled gradients
     * overflowed (fp16's warm-up does it) keeps its loss in the epoch's mean; only a loss that is
     * not finite is left out, so that DJL's divergence check does not take a skip for divergence.
     * One host read, for skipped batches only, next to DJL's own read of the same loss.
     */
    private boolean isFinite(NDList labels, NDList predictions) {
        NDArray loss = inner.evaluate(labels, predictions);
        float sum = AmpBackends.forManager(loss.getManager()).readFloat(loss.sum());
        return Float.isFinite(sum);
    }

    private static String[] withoutTrainingKeys(String[] keys) {
        return Arrays.stream(keys).filter(k -> !k.startsWith(TRAINING_KEYS)).toArray(String[]::new);
    }

    /** {@inheritDoc} */
    @Override
    public void resetAccumulator(String key) {
        inner.resetAccumulator(key);
    }

    /** {@inheritDoc} */
    @Override
    public float getAccumulator(String key) {
        return inner.getAccumulator(key);
    }
}
