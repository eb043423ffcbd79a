package io.github.djlamp.amp.doctor;

import ai.djl.training.TrainingConfig;
import ai.djl.training.listener.TrainingListener;
import io.github.djlamp.amp.train.ForwardingTrainingConfig;
import java.util.ArrayList;
import java.util.List;

/** The user's training configuration, unchanged but for one more listener at the end. */
final class RecordingTrainingConfig extends ForwardingTrainingConfig {

    private final List<TrainingListener> listeners;

    RecordingTrainingConfig(TrainingConfig delegate, TrainingListener recorder) {
        super(delegate);
        List<TrainingListener> all = new ArrayList<>(delegate.getTrainingListeners());
        all.add(recorder);
        this.listeners = List.copyOf(all);
    }

    @Override
    public List<TrainingListener> getTrainingListeners() {
        return listeners;
    }
}
