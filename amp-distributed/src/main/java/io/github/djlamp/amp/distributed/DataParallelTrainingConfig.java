package io.github.djlamp.amp.distributed;

import ai.djl.training.listener.LoggingTrainingListener;
import ai.djl.training.listener.SaveModelTrainingListener;
import ai.djl.training.listener.TrainingListener;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.ForwardingTrainingConfig;
import java.util.ArrayList;
import java.util.List;

/**
 * A djl-amp configuration trained across ranks: the {@link DataParallelListener} first, and on
 * ranks other than 0 neither logging nor checkpoint listeners.
 */
final class DataParallelTrainingConfig extends ForwardingTrainingConfig {

    private final List<TrainingListener> listeners;

    DataParallelTrainingConfig(AmpTrainingConfig delegate, World world, BucketedAllReduce reducer) {
        super(delegate);
        List<TrainingListener> all = new ArrayList<>();
        all.add(new DataParallelListener(world, reducer));
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
    public List<TrainingListener> getTrainingListeners() {
        return listeners;
    }
}
