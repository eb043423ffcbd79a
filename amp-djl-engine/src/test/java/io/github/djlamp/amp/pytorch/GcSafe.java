package io.github.djlamp.amp.pytorch;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.loss.Loss;

/**
 * Arithmetic with a Java number that backward may read, safe from a garbage collection between
 * forward and backward. DJL's {@code mul(Number)} (and {@code div}, {@code pow}, {@code maximum},
 * {@code minimum}) makes the number an array over a Java buffer that libtorch uses without a copy
 * and drops that array at once; autograd keeps the number for backward, and a collection in between
 * frees it (README, "DJL defects djl-amp cannot fix"): the gradient through the operation becomes
 * ~0, NaN or Inf. Here the number is made by the engine ({@code full}), whose storage libtorch
 * owns; a 0-dim fp32 array, as DJL makes it, so the result is bitwise DJL's.
 */
public final class GcSafe {

    private GcSafe() {}

    /**
     * Returns {@code array.mul(value)}, the value made by the engine.
     *
     * @param array the array, which may take part in a backward
     * @param value the factor
     * @return the product, on the array's manager
     */
    public static NDArray mul(NDArray array, float value) {
        // autograd holds its own reference to the factor: closing DJL's handle frees nothing
        try (NDArray factor = array.getManager().full(new Shape(), value)) {
            return array.mul(factor);
        }
    }

    /**
     * DJL's {@code Loss.l2Loss()}: the mean of half the squared difference, named "L2Loss", with
     * the half made by the engine (DJL's {@code L2Loss} multiplies by a Java number).
     *
     * @return the loss
     */
    public static Loss l2Loss() {
        return new Loss("L2Loss") {
            @Override
            public NDArray evaluate(NDList labels, NDList predictions) {
                NDArray prediction = predictions.singletonOrThrow();
                NDArray label = labels.singletonOrThrow().reshape(prediction.getShape());
                return mul(label.sub(prediction).square(), 0.5f).mean();
            }
        };
    }

    /** Frees every Java buffer nothing refers to any more, as a collection mid-step would. */
    static void collectGarbage() {
        System.gc();
        try {
            Thread.sleep(100); // the buffers' cleaner runs on its own thread
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
