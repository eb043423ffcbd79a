package io.github.djlamp.amp.distributed;

import ai.djl.training.evaluator.Evaluator;
import ai.djl.training.listener.LoggingTrainingListener;
import ai.djl.training.listener.SaveModelTrainingListener;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.loss.Loss;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.ForwardingTrainingConfig;
import java.util.ArrayList;
import java.util.List;

/**
 * A djl-amp configuration trained across ranks: the {@link DataParallelListener} first, the loss
 * and evaluators reporting epoch values averaged over the ranks, and on ranks other than 0 neither
 * logging nor checkpoint listeners.
 */
final class DataParallelTrainingConfig extends ForwardingTrainingConfig {

    private final List<TrainingListener> listeners;
    private final RankMeanLoss loss;
    private final List<Evaluator> evaluators;

    DataParallelTrainingConfig(AmpTrainingConfig delegate, World world, BucketedAllReduce reducer) {
        super(delegate);
        loss = new RankMeanLoss(delegate.getLossFunction());
        List<Evaluator> wrapped = new ArrayList<>();
        List<RankMeans> means = new ArrayList<>();
        for (Evaluator evaluator : delegate.getEvaluators()) {
            RankMeanEvaluator mean = new RankMeanEvaluator(evaluator);
            wrapped.add(mean);
            means.add(mean.getMeans());
        }
        // the trainer adds the loss to the evaluators after the configured ones
        List<Evaluator> reported = new ArrayList<>(wrapped);
        reported.add(loss);
        means.add(loss.getMeans());
        evaluators = List.copyOf(wrapped);
        List<TrainingListener> all = new ArrayList<>();
        all.add(new DataParallelListener(world, reducer, reported, means));
        for (TrainingListener listener : delegate.getTrainingListeners()) {
            if (world.isRoot() || !rootOnly(listener)) {
                all.add(listener);
            }
        }
        listeners = List.copyOf(all);
    }

    /** Listeners that write to the console or to files: one copy of their output is enough. */
    static boolean rootOnly(TrainingListener listener) {
        return listener instanceof LoggingTrainingListener
                || listener instanceof SaveModelTrainingListener;
    }

    /** {@inheritDoc} */
    @Override
    public Loss getLossFunction() {
        return loss;
    }

    /** {@inheritDoc} */
    @Override
    public List<Evaluator> getEvaluators() {
        return evaluators;
    }

    /** {@inheritDoc} */
    @Override
    public List<TrainingListener> getTrainingListeners() {
        return listeners;
    }
}
