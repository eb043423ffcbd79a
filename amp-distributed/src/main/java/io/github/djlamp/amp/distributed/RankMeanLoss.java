package io.github.djlamp.amp.distributed;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.training.loss.Loss;

/**
 * A loss whose epoch values (what DJL reports as the loss) are the mean over the ranks (once {@link
 * DataParallelListener} synced them at the end of the epoch); the loss itself (what backward sees)
 * is the wrapped loss.
 */
final class RankMeanLoss extends Loss {

    private final Loss inner;
    private final RankMeans means = new RankMeans();

    RankMeanLoss(Loss inner) {
        super(inner.getName());
        this.inner = inner;
    }

    RankMeans getMeans() {
        return means;
    }

    /** {@inheritDoc} */
    @Override
    public NDArray evaluate(NDList labels, NDList predictions) {
        return inner.evaluate(labels, predictions);
    }

    /** {@inheritDoc} */
    @Override
    public void addAccumulator(String key) {
        means.forget(key);
        inner.addAccumulator(key);
    }

    /** {@inheritDoc} */
    @Override
    public void updateAccumulators(String[] keys, NDList labels, NDList predictions) {
        for (String key : keys) {
            means.forget(key);
        }
        inner.updateAccumulators(keys, labels, predictions);
    }

    /** {@inheritDoc} */
    @Override
    public void updateAccumulator(String key, NDList labels, NDList predictions) {
        means.forget(key);
        inner.updateAccumulator(key, labels, predictions);
    }

    /** {@inheritDoc} */
    @Override
    public void resetAccumulator(String key) {
        means.forget(key);
        inner.resetAccumulator(key);
    }

    /** {@inheritDoc} */
    @Override
    public float getAccumulator(String key) {
        Float mean = means.get(key);
        return mean != null ? mean : inner.getAccumulator(key);
    }
}
