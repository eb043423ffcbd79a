package io.github.djlamp.amp.capture;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import java.util.HashSet;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The arrays a graph reads its batch from: made for the first batch's shapes, every later batch of
 * those shapes copied into them on the device. A batch of other shapes (the last, partial one) does
 * not fit, which is said once for each such shape.
 */
final class StaticBatch {

    private static final Logger logger = LoggerFactory.getLogger(StaticBatch.class);

    private final Set<StepSignature> otherShapes = new HashSet<>();
    private StepSignature signature;
    private NDList data;
    private NDList labels;

    /**
     * Copies a batch into the static arrays, made under {@code manager} for the first one.
     *
     * @return false, copying nothing, when the batch's shapes are not the static arrays'
     */
    boolean take(CaptureHooks hooks, NDManager manager, NDList batchData, NDList batchLabels) {
        if (signature == null) {
            signature = StepSignature.of(batchData, batchLabels);
            data = likeTheBatch(batchData, manager);
            labels = likeTheBatch(batchLabels, manager);
            return true;
        } else if (!signature.matches(batchData, batchLabels)) {
            StepSignature batch = StepSignature.of(batchData, batchLabels);
            if (otherShapes.add(batch)) {
                logger.info(
                        "djl-amp runs a step of other shapes eagerly ({}; the graph holds {}):"
                                + " a graph replays only the shapes it captured",
                        batch,
                        signature);
            }
            return false;
        }
        hooks.copy(data, batchData);
        hooks.copy(labels, batchLabels);
        return true;
    }

    /**
     * Copies of the first batch's arrays, in their layout: DJL's image pipelines give batches that
     * are channels-last in memory (ToTensor transposes each image), and a convolution on another
     * layout runs other kernels, which round otherwise than the eager step's.
     */
    private static NDList likeTheBatch(NDList batch, NDManager manager) {
        NDList arrays = new NDList(batch.size());
        for (NDArray array : batch) {
            NDArray copy = array.duplicate(); // libtorch's clone keeps the strides
            copy.attach(manager);
            arrays.add(copy);
        }
        return arrays;
    }

    NDList data() {
        return data;
    }

    NDList labels() {
        return labels;
    }

    StepSignature signature() {
        return signature;
    }
}
