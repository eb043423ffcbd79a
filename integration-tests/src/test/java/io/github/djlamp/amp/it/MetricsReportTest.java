package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Model;
import ai.djl.metric.Metric;
import ai.djl.metric.Metrics;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.train.AmpTrainingListener;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The listener publishes the loss scale and the skipped steps to the trainer's Metrics. */
class MetricsReportTest {

    @Test
    void lossScaleAndSkippedStepsArePublishedEveryStep() {
        try (Model model = Model.newInstance("metrics", "PyTorch")) {
            model.setBlock(Amp.wrap(Linear.builder().setUnits(2).build(), "mixed_float16"));
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(GcSafe.l2Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.01f))
                                            .build());
            // fused steps (the GPU default) publish at the scaler's host reads: every step here
            AmpOptions perStep = AmpOptions.builder().hostSyncInterval(1).build();
            try (Trainer trainer =
                    model.newTrainer(Amp.configure(config, model.getBlock(), perStep))) {
                trainer.setMetrics(new Metrics());
                trainer.initialize(new Shape(2, 3));
                float[] poison = {1f, Float.NaN, 1f, Float.NaN, 1f};
                for (float p : poison) {
                    NDManager m = trainer.getManager().newSubManager();
                    NDArray x = m.ones(new Shape(2, 3)).mul(p);
                    Batch batch =
                            new Batch(
                                    m,
                                    new NDList(x),
                                    new NDList(m.zeros(new Shape(2, 2))),
                                    2,
                                    null,
                                    null,
                                    0,
                                    1);
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                    batch.close();
                }
                List<Metric> scales =
                        trainer.getMetrics().getMetric(AmpTrainingListener.LOSS_SCALE);
                List<Metric> skipped =
                        trainer.getMetrics().getMetric(AmpTrainingListener.SKIPPED_STEPS);
                assertEquals(poison.length, scales.size());
                assertEquals(poison.length, skipped.size());
                // the two NaN batches halve the scale and count as skipped (fp16's own first
                // overflows at 2^16 may add to both)
                double last = skipped.get(poison.length - 1).getValue().doubleValue();
                double first = skipped.get(0).getValue().doubleValue();
                assertEquals(2, last - first);
                assertEquals(
                        scales.get(0).getValue().doubleValue() / 4,
                        scales.get(poison.length - 1).getValue().doubleValue());
            }
        }
    }
}
