package io.github.djlamp.amp.doctor;

import ai.djl.Device;
import ai.djl.nn.Parameter;
import ai.djl.training.TrainingConfig;
import ai.djl.training.evaluator.Evaluator;
import ai.djl.training.initializer.Initializer;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.util.PairList;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.function.Predicate;

/** The user's training configuration, unchanged but for one more listener at the end. */
final class RecordingTrainingConfig implements TrainingConfig {

    private final TrainingConfig delegate;
    private final List<TrainingListener> listeners;

    RecordingTrainingConfig(TrainingConfig delegate, TrainingListener recorder) {
        this.delegate = delegate;
        List<TrainingListener> all = new ArrayList<>(delegate.getTrainingListeners());
        all.add(recorder);
        this.listeners = List.copyOf(all);
    }

    @Override
    public Device[] getDevices() {
        return delegate.getDevices();
    }

    @Override
    public PairList<Initializer, Predicate<Parameter>> getInitializers() {
        return delegate.getInitializers();
    }

    @Override
    public Optimizer getOptimizer() {
        return delegate.getOptimizer();
    }

    @Override
    public Loss getLossFunction() {
        return delegate.getLossFunction();
    }

    @Override
    public ExecutorService getExecutorService() {
        return delegate.getExecutorService();
    }

    @Override
    public List<Evaluator> getEvaluators() {
        return delegate.getEvaluators();
    }

    @Override
    public List<TrainingListener> getTrainingListeners() {
        return listeners;
    }
}
