package io.github.djlamp.amp.capture;

import ai.djl.ndarray.NDList;

/**
 * The part of a custom loop's step that a {@link CapturedStep} runs and captures: forward, loss and
 * backward inside a {@code GradientCollector}, and, for users who clip, {@code
 * amp.unscaleGradients()} and the clipping. The step's end ({@code amp.step()}) is the captured
 * step's own.
 */
@FunctionalInterface
public interface StepBody {

    /**
     * Runs one step's forward, loss and backward.
     *
     * @param data the batch's data: arrays the captured step owns, the same from one step to the
     *     next (never close or keep them)
     * @param labels the batch's labels, owned alike
     * @return what the loop reads after the step (the loss, the predictions): arrays on the
     *     trainer's device, made in the step; the captured step keeps them and overwrites them at
     *     every replay
     */
    NDList run(NDList data, NDList labels);
}
