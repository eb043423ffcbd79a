package io.github.djlamp.amp.distributed;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * djl-amp's extension point for data parallelism: the reducer sees every gradient still scaled,
 * before the fused check, so what it leaves there decides the step.
 */
class GradientReducerHookTest {

    @Test
    void theReducerRunsBeforeTheCheckOnScaledGradientsAndItsInfSkipsTheStep() {
        try (Model model = Model.newInstance("hook");
                NDManager manager = NDManager.newBaseManager()) {
            model.setBlock(Amp.wrap(Linear.builder().setUnits(2).build(), "fp32"));
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(GcSafe.l2Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build());
            AmpOptions options = AmpOptions.builder().lossScaling(LossScaling.fixed(1024f)).build();
            try (Trainer trainer =
                    model.newTrainer(Amp.configure(config, model.getBlock(), options))) {
                trainer.initialize(new Shape(4, 3));
                AmpSession session = AmpSession.of(trainer);
                List<Float> seenMagnitudes = new ArrayList<>();
                session.setGradientReducer(
                        (gradients, stepManager) -> {
                            NDList grads = gradients.byReplica().get(0);
                            seenMagnitudes.add(grads.get(0).abs().sum().getFloat());
                            grads.get(0).muli(Float.POSITIVE_INFINITY);
                        });
                float[] before =
                        model.getBlock()
                                .getParameters()
                                .get(0)
                                .getValue()
                                .getArray()
                                .toFloatArray();
                NDArray x = manager.ones(new Shape(4, 3));
                NDArray y = manager.zeros(new Shape(4, 2));
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    NDArray loss =
                            trainer.getLoss()
                                    .evaluate(new NDList(y), trainer.forward(new NDList(x)));
                    collector.backward(loss);
                }
                session.unscaleGradients();
                assertTrue(session.isSkipping(), "the reducer's Inf skips the step");
                session.step();
                assertEquals(1, seenMagnitudes.size());
                // the loss scale of 1024 is still on the gradients the reducer sees
                assertTrue(seenMagnitudes.get(0) > 100, "saw " + seenMagnitudes.get(0));
                assertArrayEquals(
                        before,
                        model.getBlock()
                                .getParameters()
                                .get(0)
                                .getValue()
                                .getArray()
                                .toFloatArray());
                assertEquals(1, session.getScaler().getSkippedSteps());
            }
        }
    }
}
