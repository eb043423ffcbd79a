package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.nn.Parameter;
import ai.djl.training.TrainingConfig;
import ai.djl.training.evaluator.Evaluator;
import ai.djl.training.initializer.Initializer;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.util.PairList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.function.Predicate;

/**
 * A {@link TrainingConfig} that answers everything from another one: subclasses override only what
 * they change.
 */
public abstract class ForwardingTrainingConfig implements TrainingConfig {

    private final TrainingConfig delegate;

    /**
     * Forwards to {@code delegate}.
     *
     * @param delegate the configuration that answers what is not overridden
     */
    protected ForwardingTrainingConfig(TrainingConfig delegate) {
        this.delegate = Objects.requireNonNull(delegate, "delegate");
    }

    /**
     * Returns the configuration this one forwards to.
     *
     * @return the delegate
     */
    protected TrainingConfig delegate() {
        return delegate;
    }

    /** {@inheritDoc} */
    @Override
    public Device[] getDevices() {
        return delegate.getDevices();
    }

    /** {@inheritDoc} */
    @Override
    public PairList<Initializer, Predicate<Parameter>> getInitializers() {
        return delegate.getInitializers();
    }

    /** {@inheritDoc} */
    @Override
    public Optimizer getOptimizer() {
        return delegate.getOptimizer();
    }

    /** {@inheritDoc} */
    @Override
    public Loss getLossFunction() {
        return delegate.getLossFunction();
    }

    /** {@inheritDoc} */
    @Override
    public ExecutorService getExecutorService() {
        return delegate.getExecutorService();
    }

    /** {@inheritDoc} */
    @Override
    public List<Evaluator> getEvaluators() {
        return delegate.getEvaluators();
    }

    /** {@inheritDoc} */
    @Override
    public List<TrainingListener> getTrainingListeners() {
        return delegate.getTrainingListeners();
    }
}
