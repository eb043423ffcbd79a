package io.github.djlamp.amp.cast.internal;

import ai.djl.ndarray.NDList;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;

/**
 * A whole training step run from inside a block's training forward: the trainer glue's way to
 * capture {@code EasyTrain.fit}'s step, whose forward, loss, backward and update DJL runs from
 * separate calls. Set on a block's {@link TrainingLink}.
 */
public interface StepInForward {

    /**
     * Runs the step a training forward with labels begins (forward, loss, backward and the
     * optimizer step), or nothing.
     *
     * @param store the trainer's parameter store
     * @param data the batch's data
     * @param labels the batch's labels
     * @param params the forward's parameters
     * @return the forward's outputs, after the whole step ran; null to run the forward as usual
     */
    NDList run(ParameterStore store, NDList data, NDList labels, PairList<String, Object> params);

    /** Any forward of the block begins: a step completed inside an earlier forward is over. */
    void forwardBegins();
}
