package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.training.EasyTrain;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.dataset.Dataset;
import ai.djl.training.listener.TrainingListener.BatchData;
import ai.djl.translate.TranslateException;
import io.github.djlamp.amp.capture.CapturedStep;
import io.github.djlamp.amp.capture.StepBody;
import io.github.djlamp.amp.spi.StepGraphs;
import java.io.IOException;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * {@code EasyTrain.fit} with the captured step: where a step can be captured ({@link
 * AmpSession#captureStep}: one CUDA device, a fused optimizer step, ...), each batch's forward,
 * loss, backward and optimizer step are captured once and replayed, and the listeners see each
 * batch's labels and predictions after its step; everywhere else every batch runs exactly as {@code
 * EasyTrain.fit} runs it ({@code trainBatch}, {@code trainer.step()}).
 *
 * <pre>{@code
 * AmpTrain.fit(trainer, epochs, trainingSet, validationSet); // in place of EasyTrain.fit
 * }</pre>
 *
 * <p>What a listener sees differs from {@code EasyTrain} only on captured steps: {@code
 * onTrainingBatch} is called after the optimizer step instead of before it (the predictions and
 * labels are the same; a gradient read there is already consumed), and the trainer's {@code
 * backward} and {@code training-metrics} timings are not recorded (a replay has no phases).
 */
public final class AmpTrain {

    private AmpTrain() {}

    /**
     * Trains as {@code EasyTrain.fit} does, capturing the step where it can.
     *
     * @param trainer a trainer configured through {@code Amp.configure}
     * @param numEpoch the number of epochs
     * @param trainingDataset the training data
     * @param validateDataset the validation data, or null
     * @throws IOException when the data cannot be read
     * @throws TranslateException when the data cannot be translated
     * @throws io.github.djlamp.amp.exception.AmpException when the trainer was not configured
     *     through {@code Amp.configure}
     */
    public static void fit(
            Trainer trainer, int numEpoch, Dataset trainingDataset, Dataset validateDataset)
            throws IOException, TranslateException {
        fit(trainer, numEpoch, trainingDataset, validateDataset, null);
    }

    /** {@link #fit} with {@code graphs} instead of the engine's (null): tests stand one in. */
    static void fit(
            Trainer trainer,
            int numEpoch,
            Dataset trainingDataset,
            Dataset validateDataset,
            StepGraphs graphs)
            throws IOException, TranslateException {
        Objects.requireNonNull(trainer, "AmpTrain.fit needs the trainer, got null");
        AmpSession amp = AmpSession.of(trainer);
        try (CapturedStep step =
                amp.captureStep(body(trainer), CapturedStep.DEFAULT_WARM_UP_STEPS, graphs)) {
            boolean capturing = !step.isEager();
            for (int epoch = 0; epoch < numEpoch; epoch++) {
                for (Batch batch : trainer.iterateDataset(trainingDataset)) {
                    if (capturing) {
                        trainBatch(trainer, amp, step, batch);
                    } else {
                        EasyTrain.trainBatch(trainer, batch);
                        trainer.step();
                    }
                    batch.close();
                }
                EasyTrain.evaluateDataset(trainer, validateDataset);
                trainer.notifyListeners(listener -> listener.onEpoch(trainer));
            }
        }
    }

    /** One batch through the captured step, then the listeners on its labels and predictions. */
    private static void trainBatch(
            Trainer trainer, AmpSession amp, CapturedStep step, Batch batch) {
        Batch onDevice = batch.split(trainer.getDevices(), false)[0];
        NDList labels = onDevice.getLabels();
        NDList predictions = step.run(onDevice.getData(), labels);
        Device device = trainer.getDevices()[0];
        // mutable maps, as EasyTrain's: a listener may add to them
        BatchData batchData =
                new BatchData(batch, new ConcurrentHashMap<>(), new ConcurrentHashMap<>());
        batchData.getLabels().put(device, labels);
        batchData.getPredictions().put(device, predictions);
        amp.setStepDoneBeforeListeners(true);
        try {
            trainer.notifyListeners(listener -> listener.onTrainingBatch(trainer, batchData));
        } finally {
            amp.setStepDoneBeforeListeners(false);
        }
    }

    /** What {@code EasyTrain.trainBatch} runs for one device: forward, loss, backward. */
    private static StepBody body(Trainer trainer) {
        return (data, labels) -> {
            try (GradientCollector collector = trainer.newGradientCollector()) {
                NDList predictions = trainer.forward(data, labels);
                NDArray loss = trainer.getLoss().evaluate(labels, predictions);
                collector.backward(loss);
                return predictions;
            }
        };
    }
}
