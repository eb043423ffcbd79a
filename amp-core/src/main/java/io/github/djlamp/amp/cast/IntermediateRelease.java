package io.github.djlamp.amp.cast;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/**
 * Drops djl-amp's own handles to the arrays one forward pass of the shadow tree made and no longer
 * reads: the output of a stage once the next stage has consumed it, the cast copies a stage made of
 * its inputs, the branch outputs of a parallel block once joined.
 *
 * <p>DJL attaches every intermediate array to the batch's manager and keeps it until {@code
 * batch.close()}; a DJL handle owns a reference to the native tensor, so every activation of the
 * forward pass stays allocated through backward, including those autograd does not save (a
 * BatchNorm output consumed by a ReLU, a cast copy). Closing the handle drops only djl-amp's
 * reference: autograd keeps its own on what backward needs, PyTorch frees the rest. Never closed: a
 * container's inputs (its caller's), anything passed on to the next stage or returned, and
 * parameters (stages never return them).
 *
 * <p>{@code -Ddjlamp.amp.releaseIntermediates=false} keeps every handle, as plain DJL does.
 */
final class IntermediateRelease {

    /** The system property that turns the release off. */
    static final String PROPERTY = "djlamp.amp.releaseIntermediates";

    private IntermediateRelease() {}

    static boolean enabled() {
        return !"false".equalsIgnoreCase(System.getProperty(PROPERTY));
    }

    /**
     * Closes every array of {@code consumed} that is in none of the lists to keep.
     *
     * @param consumed arrays made by this forward pass that were read and are not needed any more
     * @param keep lists whose arrays must stay open: what the caller handed in, what goes on
     */
    static void closeConsumed(NDList consumed, NDList... keep) {
        closeConsumed(Collections.singletonList(consumed), keep);
    }

    /**
     * Closes every array of the {@code consumed} lists that is in none of the lists to keep.
     *
     * @param consumed lists of arrays made by this forward pass that are not needed any more
     * @param keep lists whose arrays must stay open
     */
    static void closeConsumed(List<NDList> consumed, NDList... keep) {
        if (!enabled()) {
            return;
        }
        Set<NDArray> kept = Collections.newSetFromMap(new IdentityHashMap<>());
        for (NDList list : keep) {
            kept.addAll(list);
        }
        for (NDList list : consumed) {
            for (NDArray array : list) {
                if (kept.add(array)) { // once per array, even when a list holds it twice
                    array.close();
                }
            }
        }
    }
}
