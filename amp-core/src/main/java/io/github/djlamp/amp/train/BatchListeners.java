package io.github.djlamp.amp.train;

import ai.djl.training.Trainer;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.listener.TrainingListener.BatchData;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * The training listeners that would read a captured batch wrong. Under {@code EasyTrain.fit} a
 * captured step has updated the weights and consumed the gradients before {@code onTrainingBatch}:
 * DJL's own listeners and djl-amp's read only the batch's predictions, labels and timings there,
 * but a listener of the user's that reads gradients or weights in {@code onTrainingBatch} would see
 * the step's end instead of its middle.
 */
final class BatchListeners {

    private static final String DJL_LISTENERS = "ai.djl.training.listener.";

    /** djl-amp's own, which read the batch's loss and the scaler's state only. */
    private static final Set<Class<?>> DJL_AMP =
            Set.of(AmpTrainingListener.class, AmpDivergenceCheckTrainingListener.class);

    private BatchListeners() {}

    /**
     * Returns why the trainer's listeners keep its step from being captured, or null.
     *
     * @param trainer the trainer
     * @return the listeners of the user's that act in {@code onTrainingBatch}, in words, or null
     */
    static String refusal(Trainer trainer) {
        List<String> acting = new ArrayList<>();
        trainer.notifyListeners(
                listener -> {
                    if (actsOnTrainingBatch(listener)) {
                        acting.add(listener.getClass().getName());
                    }
                });
        if (acting.isEmpty()) {
            return null;
        }
        return "the training listener "
                + String.join(", ", acting)
                + " acts in onTrainingBatch, which a captured step reaches after the optimizer"
                + " step (weights updated, gradients consumed); move that work to onEpoch, or"
                + " capture a custom loop's step with AmpSession.captureStep";
    }

    private static boolean actsOnTrainingBatch(TrainingListener listener) {
        Class<?> owner;
        try {
            owner =
                    listener.getClass()
                            .getMethod("onTrainingBatch", Trainer.class, BatchData.class)
                            .getDeclaringClass();
        } catch (NoSuchMethodException e) {
            return true; // cannot tell: as if it did
        }
        return !owner.getName().startsWith(DJL_LISTENERS) && !DJL_AMP.contains(owner);
    }
}
