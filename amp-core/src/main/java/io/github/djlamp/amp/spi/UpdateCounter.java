package io.github.djlamp.amp.spi;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.DataType;
import io.github.djlamp.amp.exception.AmpException;

/**
 * DJL's count of optimizer updates, kept on the device for fused steps. DJL's {@code Optimizer}
 * counts, for each parameter, the steps applied to it (starting from {@code beginNumUpdate}), and
 * gives every update the largest such count seen so far: a schedule and Adam's bias corrections use
 * that count. A skipped step counts nothing, which only the device knows once skips are decided
 * there.
 */
public final class UpdateCounter {

    private final NDArray perParameter;
    private final NDArray trained;
    private final NDArray count;
    private final int beginNumUpdate;

    /**
     * Creates the counter over arrays the caller owns.
     *
     * @param perParameter FLOAT64, one slot per parameter: the steps applied to it
     * @param trained FLOAT64 of the same shape: 1 for the slots of the parameters in this step, 0
     *     elsewhere
     * @param count a one-element FLOAT64 array: DJL's update count, 0 before the first update
     * @param beginNumUpdate DJL's {@code beginNumUpdate}, added to every parameter's count
     */
    public UpdateCounter(NDArray perParameter, NDArray trained, NDArray count, int beginNumUpdate) {
        if (perParameter.getDataType() != DataType.FLOAT64
                || trained.getDataType() != DataType.FLOAT64
                || count.getDataType() != DataType.FLOAT64
                || perParameter.getShape().dimension() != 1
                || !perParameter.getShape().equals(trained.getShape())
                || count.size() != 1) {
            throw new AmpException(
                    "An update counter needs FLOAT64 arrays: per-parameter counts and a mask of"
                            + " one shape (one dimension) and a one-element count; got "
                            + perParameter.getDataType()
                            + " "
                            + perParameter.getShape()
                            + ", "
                            + trained.getDataType()
                            + " "
                            + trained.getShape()
                            + " and "
                            + count.getDataType()
                            + " "
                            + count.getShape());
        }
        if (beginNumUpdate < 0) {
            throw new AmpException(
                    "beginNumUpdate counts steps and cannot be negative, got " + beginNumUpdate);
        }
        this.perParameter = perParameter;
        this.trained = trained;
        this.count = count;
        this.beginNumUpdate = beginNumUpdate;
    }

    /**
     * Returns the steps applied to each parameter's slot.
     *
     * @return the per-parameter counts
     */
    public NDArray getPerParameter() {
        return perParameter;
    }

    /**
     * Returns the mask of the slots trained in this step.
     *
     * @return 1 for a trained slot, 0 elsewhere
     */
    public NDArray getTrained() {
        return trained;
    }

    /**
     * Returns DJL's update count, which a fused step advances in place.
     *
     * @return the one-element count
     */
    public NDArray getCount() {
        return count;
    }

    /**
     * Returns DJL's offset of every parameter's count.
     *
     * @return beginNumUpdate
     */
    public int getBeginNumUpdate() {
        return beginNumUpdate;
    }
}
