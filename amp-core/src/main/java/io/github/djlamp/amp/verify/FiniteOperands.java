package io.github.djlamp.amp.verify;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;

/**
 * The values a kernel check computes on, made finite. A check judges a signature's kernels on the
 * layer's own input and weights; a NaN or an infinity among them (a first batch with a missing
 * value, weights loaded from a run that diverged) makes the fp32 reference and the direct
 * double-precision sum non-finite where it lands, which says nothing about the kernels, and read as
 * "fp32 itself is wrong": the platform judged unsound, and that verdict kept on disk for later
 * runs. An operand that is zero throughout (a blank first batch, weights initialized to zero)
 * exercises no product, and a wrong kernel would be kept as verified on it. Such values are
 * replaced, in the check's own copy, by finite ones made on the device, so that the same kernels
 * run at the same shapes and layouts, and the caller's arrays and the engine's random numbers are
 * left as they were.
 */
final class FiniteOperands {

    private FiniteOperands() {}

    /**
     * Returns {@code value} detached from autograd where every element is finite and one is not
     * zero, else a copy of it (same shape, type and strides) whose non-finite elements (or, where
     * all are zero, all its elements) are replaced by values of {@code sin(0.7 i)} at their flat
     * index {@code i}; either attached to {@code scratch}.
     *
     * @param operand an operand of the check
     * @param backend reads whether it is finite (one host read) and copies
     * @param scratch the check's manager
     * @return the detached operand, or its finite copy
     */
    static NDArray of(NDArray operand, AmpBackend backend, NDManager scratch) {
        NDArray value = operand.stopGradient();
        value.attach(scratch);
        try (NDManager local = scratch.newSubManager()) {
            float magnitude = backend.readFloat(local(value.abs(), local).max());
            if (Float.isFinite(magnitude) && magnitude > 0) {
                return value;
            }
            NDArray index = local.arange(0f, value.size(), 1f, DataType.FLOAT32, value.getDevice());
            // cast by the backend: DJL's toType kills the JVM on the bf16 type it reads as UNKNOWN
            NDArray replacements =
                    backend.cast(
                            index.mul(0.7f).sin().reshape(value.getShape()),
                            backend.precisionOf(value),
                            MemoryLayout.CONTIGUOUS,
                            local);
            NDArray finite = replacements;
            if (magnitude != 0) {
                NDArray nonFinite =
                        local(value.isNaN(), local).logicalOr(local(value.isInfinite(), local));
                finite = local(NDArrays.where(nonFinite, replacements, value), local);
            } // else zeros throughout, which exercise no product: a wrong kernel passes on them
            // a copy of the operand keeps its strides (channels-last activations, transposed keys):
            // the check runs the kernels training runs on them
            NDArray copy = value.duplicate();
            backend.copy(new NDList(copy), new NDList(finite));
            copy.attach(scratch);
            return copy;
        }
    }

    /** Attaches an array made from the operand (on the operand's manager) to {@code local}. */
    private static NDArray local(NDArray made, NDManager local) {
        made.attach(local);
        return made;
    }
}
