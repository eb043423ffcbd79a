package io.github.djlamp.amp.cast.checkpoint;

import ai.djl.ndarray.NDManager;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;

/**
 * What checkpointing needs of the parameter store a {@code MixedPrecisionBlock}'s forward pass
 * hands down its shadow tree (the casting wrapper's, in {@code cast}, implements it): a segment
 * runs without recording and with casts of its own, the tape runs it again after backward.
 */
public interface SegmentStore {

    /**
     * Returns the store itself, for the stages' forward.
     *
     * @return this store
     */
    ParameterStore asParameterStore();

    /**
     * Returns the engine's backend of this forward pass.
     *
     * @return the backend
     */
    AmpBackend backend();

    /**
     * Returns the manager that owns this forward pass's casts (the batch's, in EasyTrain).
     *
     * @return the manager
     */
    NDManager stepManager();

    /**
     * Returns the precision low-precision stages compute in.
     *
     * @return the compute precision
     */
    Precision computePrecision();

    /**
     * Returns the trainer's own store, which holds the fp32 masters.
     *
     * @return the trainer's store
     */
    ParameterStore delegate();

    /**
     * Returns this store casting weights afresh onto {@code manager}, bypassing the step's cache.
     *
     * @param manager the manager the casts land on
     * @param recomputedLater whether this is the forward without recording, which a recomputation
     *     with recording repeats
     * @return the store
     */
    SegmentStore uncached(NDManager manager, boolean recomputedLater);

    /**
     * Returns this store counting on {@code saving} the activations its layers make.
     *
     * @param saving the count
     * @return the store
     */
    SegmentStore counting(CheckpointSaving saving);
}
