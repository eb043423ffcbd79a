package io.github.djlamp.amp.train;

import ai.djl.ndarray.NDArray;
import ai.djl.training.optimizer.Optimizer;
import java.util.Objects;

/**
 * Decorates any DJL {@link Optimizer} (Sgd, Adam, AdamW, Nag, ...) for mixed precision.
 *
 * <p>By the time DJL calls {@link #update}, djl-amp has unscaled the gradients in place, so the
 * inner optimizer's gradient clipping and weight decay see true gradients. On a step whose
 * gradients overflowed, the inner optimizer is not called at all, so weights and its state
 * (moments, update counts) stay exactly as they were, and the gradient is cleared so it does not
 * add into the next step. Inside a gradient accumulation window nothing happens, so gradients add
 * up. After a real update, the weight's 16-bit casts are dropped.
 */
public final class LossScalingOptimizer extends Optimizer {

    private final Optimizer inner;
    private final AmpSession session;

    /**
     * Wraps an optimizer.
     *
     * @param inner the optimizer that updates the weights
     * @param session the AMP session whose verdict decides skips
     */
    public LossScalingOptimizer(Optimizer inner, AmpSession session) {
        super(new NoOptions());
        this.inner = Objects.requireNonNull(inner, "inner");
        this.session = Objects.requireNonNull(session, "session");
        if (inner instanceof LossScalingOptimizer) {
            throw new IllegalArgumentException(
                    "The optimizer is already a LossScalingOptimizer; configure AMP once");
        }
    }

    /**
     * Returns the wrapped optimizer.
     *
     * @return the inner optimizer
     */
    public Optimizer getInner() {
        return inner;
    }

    /** {@inheritDoc} */
    @Override
    public void update(String parameterId, NDArray weight, NDArray grad) {
        if (session.isAccumulating()) {
            return;
        }
        if (session.isSkipping()) {
            session.clearGradient(weight);
            return;
        }
        inner.update(parameterId, weight, grad);
        session.weightUpdated(parameterId);
    }

    /** The decorator has no options of its own: the inner optimizer has them all. */
    private static final class NoOptions extends OptimizerBuilder<NoOptions> {
        @Override
        protected NoOptions self() {
            return this;
        }
    }
}
