package io.github.djlamp.amp.train;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.training.loss.Loss;
import java.util.Objects;

/**
 * The user's loss, multiplied by the loss scale for backward.
 *
 * <p>{@code EasyTrain} passes what {@link #evaluate} returns to backward, so that value is scaled.
 * Every accumulator (the loss DJL reports in its metrics, logs and training result) is delegated to
 * the user's loss and stays unscaled.
 */
public final class ScaledLoss extends Loss {

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
        inner.updateAccumulator(key, labels, predictions);
    }

    /** {@inheritDoc} */
    @Override
    public void updateAccumulators(String[] keys, NDList labels, NDList predictions) {
        inner.updateAccumulators(keys, labels, predictions);
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
