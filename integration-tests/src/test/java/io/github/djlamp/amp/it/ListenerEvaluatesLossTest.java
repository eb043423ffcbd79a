package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.Trainer;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.listener.TrainingListenerAdapter;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import org.junit.jupiter.api.Test;

/**
 * A user listener that evaluates {@code trainer.getLoss()} after backward (to record the loss, a
 * common thing to write) must not reset the step's overflow verdict under fp16; a training forward
 * pass with no check after it still must not reach the optimizer unchecked.
 */
class ListenerEvaluatesLossTest {

    @Test
    void evaluatingTheLossInAListenerKeepsTheVerdict() {
        Engine.getInstance().setRandomSeed(4);
        try (Model model = Model.newInstance("listener")) {
            MixedPrecisionBlock block = Amp.wrap(mlp(), "mixed_float16");
            model.setBlock(block);
            float[] recorded = new float[1];
            TrainingListener recorder =
                    new TrainingListenerAdapter() {
                        @Override
                        public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                            for (NDList labels : batchData.getLabels().values()) {
                                NDList predictions =
                                        batchData.getPredictions().get(labels.head().getDevice());
                                recorded[0] =
                                        trainer.getLoss().evaluate(labels, predictions).getFloat();
                            }
                        }
                    };
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build())
                            .addTrainingListeners(recorder);
            try (Trainer trainer =
                    model.newTrainer(
                            Amp.configure(
                                    config,
                                    block,
                                    LossScaling.dynamicBuilder().initScale(256f).build()))) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(trainer.getManager());
                for (int step = 0; step < 4; step++) {
                    task.trainStep(trainer, step);
                }
                assertEquals(4, AmpSession.of(trainer).getScaler().getSteps());
                assertTrue(Float.isFinite(recorded[0]) && recorded[0] > 0, "recorded loss");
            }
        }
    }

    @Test
    void aForwardPassWithoutCheckStillCannotReachTheOptimizer() {
        Engine.getInstance().setRandomSeed(4);
        try (Model model = Model.newInstance("unchecked")) {
            MixedPrecisionBlock block = Amp.wrap(mlp(), "mixed_float16");
            model.setBlock(block);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build());
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block))) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(trainer.getManager());
                task.trainStep(trainer, 0);
                // a second forward and backward, then the optimizer, with no check in between
                try (ai.djl.training.GradientCollector collector = trainer.newGradientCollector()) {
                    NDList x = new NDList(task.x.get(task.rows(1)));
                    NDList y = new NDList(task.y.get(task.rows(1)));
                    collector.backward(trainer.getLoss().evaluate(y, trainer.forward(x)));
                }
                IllegalStateException e = assertThrows(IllegalStateException.class, trainer::step);
                assertNotEquals(-1, e.getMessage().indexOf("before djl-amp checked"));
            }
        }
    }

    private static SequentialBlock mlp() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(16).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(ToyTask.CLASSES).build());
    }
}
