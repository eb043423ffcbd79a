package io.github.djlamp.amp.train;

import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.scale.GradientSet;

/**
 * Combines the gradients of several training processes before djl-amp checks them: the extension
 * point of data-parallel training (see the {@code amp-distributed} module).
 *
 * <p>Called once per optimizer step, after the last backward of the step (of an accumulation
 * window, its last batch) and before the fused unscale-and-check, with every trainable parameter's
 * gradients, still multiplied by the loss scale. It must leave in place the gradients every process
 * is to step with (for data parallelism: their mean over the processes). Since the check then runs
 * on identical gradients everywhere, every process takes the same skip decision and keeps the same
 * loss scale without further communication.
 */
@FunctionalInterface
public interface GradientReducer {

    /**
     * Reduces this step's gradients in place.
     *
     * @param gradients every device's gradients of every trainable parameter, scaled
     * @param stepManager a manager closed at the end of the step, for per-step arrays
     */
    void reduce(GradientSet gradients, NDManager stepManager);
}
