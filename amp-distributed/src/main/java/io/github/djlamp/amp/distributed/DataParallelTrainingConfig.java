package io.github.djlamp.amp.distributed;

import ai.djl.training.evaluator.Evaluator;
import ai.djl.training.listener.LoggingTrainingListener;
import ai.djl.training.listener.MemoryTrainingListener;
import ai.djl.training.listener.SaveModelTrainingListener;
import ai.djl.training.listener.TimeMeasureTrainingListener;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.loss.Loss;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.ForwardingTrainingConfig;
import io.github.djlamp.amp.train.GradientReducer;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A djl-amp configuration trained across ranks: the {@link DataParallelListener} first, the loss
 * and evaluators reporting epoch values averaged over the ranks, and on ranks other than 0 neither
 * logging nor checkpoint listeners; rank 0's DJL checkpoint listener writes atomically.
 */
final class DataParallelTrainingConfig extends ForwardingTrainingConfig {

    private static final Logger logger = LoggerFactory.getLogger(DataParallelTrainingConfig.class);

    private final List<TrainingListener> listeners;
    private final RankMeanLoss loss;
    private final List<Evaluator> evaluators;

    DataParallelTrainingConfig(AmpTrainingConfig delegate, World world, GradientReducer reducer) {
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
            if (!rootOnly(listener)) {
                all.add(listener);
            } else if (world.isRoot()) {
                all.add(atomic(listener));
            }
        }
        listeners = List.copyOf(all);
    }

    /**
     * Listeners that write to the console or to files (DJL's progress bar and epoch summaries,
     * timing and memory logs, checkpoints): one copy of their output is enough, and ranks writing
     * the same files would corrupt them.
     */
    static boolean rootOnly(TrainingListener listener) {
        return listener instanceof LoggingTrainingListener
                || listener instanceof TimeMeasureTrainingListener
                || listener instanceof MemoryTrainingListener
                || listener instanceof SaveModelTrainingListener;
    }

    /** DJL's checkpoint listener, made to write atomically; any other listener as it is. */
    static TrainingListener atomic(TrainingListener listener) {
        if (listener.getClass() == SaveModelTrainingListener.class) {
            return AtomicSaveModelTrainingListener.of((SaveModelTrainingListener) listener);
        }
        if (listener instanceof SaveModelTrainingListener
                && !(listener instanceof AtomicSaveModelTrainingListener)) {
            logger.warn(
                    "djl-amp: {} saves checkpoints its own way, which may write them in place (a"
                            + " job aborted mid-save could leave a half checkpoint); save with"
                            + " AtomicCheckpoint.save(model, directory, name) to avoid it",
                    listener.getClass().getName());
        }
        return listener;
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
