package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.scale.LossScaleCollapsedException;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import org.junit.jupiter.api.Test;

/**
 * On the fused path the scaler's state is read every {@code hostSyncInterval} steps (100 by
 * default): a custom loop shorter than that whose every loss is NaN must still be told, at the
 * run's last read, when the trainer closes, as DJL's own update path tells it at the step.
 */
class ShortFusedRunDivergenceTest {

    @Test
    void aCollapseInARunShorterThanTheReadIntervalIsThrownAtClose() {
        AmpException e = runNanSteps(LossScaling.dynamic(), 24);
        assertTrue(e instanceof LossScaleCollapsedException, e.toString());
        assertTrue(((LossScaleCollapsedException) e).isLossNonFinite(), e.getMessage());
    }

    @Test
    void aFixedScaleOverflowingInARunShorterThanTheReadIntervalIsThrownAtClose() {
        AmpException e = runNanSteps(LossScaling.fixed(128), 20);
        assertTrue(
                e.getMessage().startsWith("The fixed loss scale 128.0 overflowed"), e.getMessage());
    }

    private static AmpException runNanSteps(LossScaling scaling, int steps) {
        Engine.getInstance().setRandomSeed(12);
        try (Model model = Model.newInstance("short-fused", "PyTorch");
                NDManager data = NDManager.newBaseManager("PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "mixed_float16");
            model.setBlock(block);
            Trainer trainer =
                    model.newTrainer(
                            Amp.configure(
                                    RealProgramsRig.sgd(0.1f),
                                    block,
                                    AmpOptions.builder()
                                            .lossScaling(scaling)
                                            .fusedOptimizer(FusedOptimizer.ON)
                                            .build()));
            trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
            AmpSession amp = AmpSession.of(trainer);
            NDArray x = data.full(new Shape(ToyTask.BATCH, ToyTask.FEATURES), Float.NaN);
            NDArray y = data.zeros(new Shape(ToyTask.BATCH));
            for (int step = 0; step < steps; step++) {
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    collector.backward(
                            trainer.getLoss()
                                    .evaluate(new NDList(y), trainer.forward(new NDList(x))));
                }
                amp.step(); // fused: nothing read on the host, nothing thrown yet
            }
            assertTrue(amp.getScaler().isStateOnDevice(), "the fused path keeps the state there");
            AmpException e = assertThrows(AmpException.class, trainer::close);
            assertFalse(trainer.getManager().isOpen(), "the trainer's arrays were freed");
            assertEquals(steps, amp.getScaler().getSkippedSteps(), "every step was skipped");
            return e;
        }
    }
}
