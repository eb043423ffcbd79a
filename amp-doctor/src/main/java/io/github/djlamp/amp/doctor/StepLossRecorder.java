package io.github.djlamp.amp.doctor;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.training.Trainer;
import ai.djl.training.listener.TrainingListenerAdapter;
import ai.djl.training.loss.Loss;
import java.util.Map;

/**
 * Computes the user's (unscaled) loss of each training batch from the labels and predictions DJL
 * hands to {@code onTrainingBatch}, averaged over the device splits by their size.
 */
final class StepLossRecorder extends TrainingListenerAdapter {

    private final Loss loss;
    private float lastLoss = Float.NaN;

    StepLossRecorder(Loss loss) {
        this.loss = loss;
    }

    @Override
    public void onTrainingBatch(Trainer trainer, BatchData batchData) {
        double weighted = 0;
        long count = 0;
        for (Map.Entry<Device, NDList> entry : batchData.getLabels().entrySet()) {
            NDList labels = entry.getValue();
            NDList predictions = batchData.getPredictions().get(entry.getKey());
            long size = labels.head().getShape().get(0);
            try (NDArray value = loss.evaluate(labels, predictions)) {
                weighted += value.getFloat() * (double) size;
            }
            count += size;
        }
        lastLoss = count == 0 ? Float.NaN : (float) (weighted / count);
    }

    /** Returns the loss of the last batch, and forgets it. */
    float takeLastLoss() {
        float value = lastLoss;
        lastLoss = Float.NaN;
        return value;
    }
}
