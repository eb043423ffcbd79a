package io.github.djlamp.amp.cast.strategy;

import ai.djl.ndarray.NDList;

/**
 * Drops the shadow tree's handles to the arrays a stage consumed (the casting wrapper's
 * intermediate release, in {@code cast}, implements it; switched off, it keeps every handle).
 */
@FunctionalInterface
public interface StageRelease {

    /**
     * Closes every array of {@code consumed} that is in none of the lists to keep.
     *
     * @param consumed arrays made by this forward pass that were read and are not needed any more
     * @param keep lists whose arrays must stay open: what the caller handed in, what goes on
     */
    void closeConsumed(NDList consumed, NDList... keep);
}
