package io.github.djlamp.amp.train;

import ai.djl.training.TrainingConfig;
import ai.djl.training.listener.DivergenceCheckTrainingListener;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import java.util.ArrayList;
import java.util.List;

/**
 * A user's {@link TrainingConfig} with mixed precision: the same devices, initializers, evaluators
 * and listeners, with the loss scaled for backward, the optimizer decorated to skip overflowed
 * steps, and the {@link AmpTrainingListener} first among the listeners (so the scaler state it
 * writes into the model is current when a checkpoint listener saves the model). DJL's {@code
 * DivergenceCheckTrainingListener} is replaced by an {@link AmpDivergenceCheckTrainingListener}.
 * One trainer at a time: a second trainer made from the same configuration while the first is open
 * is refused.
 */
public final class AmpTrainingConfig extends ForwardingTrainingConfig {

    private final AmpSession session;
    private final Loss loss;
    private final Optimizer optimizer;
    private final List<TrainingListener> listeners;

    /**
     * Wraps a training configuration.
     *
     * @param delegate the user's configuration
     * @param session the AMP session to train with
     */
    public AmpTrainingConfig(TrainingConfig delegate, AmpSession session) {
        super(delegate);
        if (delegate instanceof AmpTrainingConfig) {
            throw new IllegalArgumentException(
                    "The training config is already configured for mixed precision; configure"
                            + " it once");
        }
        this.session = session;
        this.loss = new ScaledLoss(delegate.getLossFunction(), session);
        this.optimizer = new LossScalingOptimizer(delegate.getOptimizer(), session);
        List<TrainingListener> all = new ArrayList<>();
        all.add(new AmpTrainingListener(session));
        for (TrainingListener listener : delegate.getTrainingListeners()) {
            // DJL's check would read a skipped step's NaN loss as divergence
            all.add(
                    listener instanceof DivergenceCheckTrainingListener
                            ? new AmpDivergenceCheckTrainingListener(session)
                            : listener);
        }
        this.listeners = List.copyOf(all);
    }

    /**
     * Returns the AMP session of trainers made from this configuration.
     *
     * @return the session
     */
    public AmpSession getSession() {
        return session;
    }

    /** {@inheritDoc} */
    @Override
    public Optimizer getOptimizer() {
        return optimizer;
    }

    /** {@inheritDoc} */
    @Override
    public Loss getLossFunction() {
        return loss;
    }

    /** {@inheritDoc} */
    @Override
    public List<TrainingListener> getTrainingListeners() {
        return listeners;
    }
}
