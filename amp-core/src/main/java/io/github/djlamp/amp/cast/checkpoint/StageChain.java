package io.github.djlamp.amp.cast.checkpoint;

import ai.djl.ndarray.NDList;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import java.util.List;

/**
 * Runs shadow stages in order, as the shadow SequentialBlock does (the casting wrapper's
 * intermediate release drops the handles to what each consumed, never the caller's inputs).
 */
@FunctionalInterface
public interface StageChain {

    /**
     * Runs {@code stages} in order.
     *
     * @param stages the shadow stages
     * @param parameterStore the store of this forward pass
     * @param inputs the first stage's inputs
     * @param training whether this is a training forward pass
     * @param params the forward's parameters
     * @return the last stage's outputs
     */
    NDList run(
            List<Block> stages,
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params);
}
