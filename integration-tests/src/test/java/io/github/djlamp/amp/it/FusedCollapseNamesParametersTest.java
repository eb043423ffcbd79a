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
import ai.djl.training.EasyTrain;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.scale.LossScaleCollapsedException;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * With fused steps the loss scaler's state is read on the host every {@code hostSyncInterval}
 * steps, so a scale that collapses between two reads is found at a later read (the epoch's end, the
 * trainer's close) whose gradients are gone. The message names the parameters whose gradients were
 * non-finite at the last host read that saw an overflow, with its step, as DJL's own update path
 * names them at the collapsing step; when no read saw one, it says how to have them named.
 *
 * <p>With the default dynamic scaling every NaN step halves the scale: 65536 reaches the minimum 1
 * after 16 skipped steps, and the 17th overflow collapses it.
 */
@Tag("one-optimizer-path") // names its path (fused, ON)
class FusedCollapseNamesParametersTest {

    private static final int INTERVAL = 5;
    private static final String FIRST_WEIGHT = "01Linear_weight";

    @Test
    void aCollapseFoundAtCloseNamesTheParametersOfTheLastOverflowingRead() {
        // reads at steps 5, 10 and 15 see the NaN gradients; the collapse at 17 is found at close
        LossScaleCollapsedException e = runNanStepsAndClose(18, INTERVAL);
        assertTrue(e.getNonFiniteParameters().contains(FIRST_WEIGHT), e.getMessage());
        assertTrue(e.getMessage().contains("non-finite in " + FIRST_WEIGHT), e.getMessage());
        assertTrue(e.getMessage().contains("at step 15"), e.getMessage());
        assertFalse(e.getMessage().contains("the overflow was elsewhere"), e.getMessage());
        assertTrue(e.isLossNonFinite(), e.getMessage());
    }

    @Test
    void aCollapseNoReadSawSaysHowToNameTheParameters() {
        LossScaleCollapsedException e =
                runNanStepsAndClose(24, AmpOptions.DEFAULT_HOST_SYNC_INTERVAL);
        assertTrue(e.getNonFiniteParameters().isEmpty(), e.getMessage());
        assertTrue(e.getMessage().contains("hostSyncInterval(1)"), e.getMessage());
        assertTrue(e.getMessage().contains("FusedOptimizer.OFF"), e.getMessage());
        assertFalse(e.getMessage().contains("the overflow was elsewhere"), e.getMessage());
    }

    @Test
    void aCollapseFoundAtTheEpochsEndNamesTheParameters() {
        Engine.getInstance().setRandomSeed(12);
        int batches = 18;
        try (Model model = Model.newInstance("fused-collapse-epoch", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "mixed_float16");
            model.setBlock(block);
            try (Trainer trainer = model.newTrainer(configure(block, INTERVAL));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                int[] everyBatch = IntStream.range(0, batches).toArray();
                LossScaleCollapsedException e =
                        assertThrows(
                                LossScaleCollapsedException.class,
                                () ->
                                        EasyTrain.fit(
                                                trainer,
                                                1,
                                                RealProgramsRig.data(data, batches, everyBatch),
                                                null));
                assertEquals(batches, AmpSession.of(trainer).getScaler().getSteps());
                assertTrue(e.getNonFiniteParameters().contains(FIRST_WEIGHT), e.getMessage());
                assertTrue(e.getMessage().contains("at step 15"), e.getMessage());
            }
        }
    }

    /** {@code steps} custom-loop steps of NaN data, then the trainer's close, which throws. */
    private static LossScaleCollapsedException runNanStepsAndClose(int steps, int interval) {
        Engine.getInstance().setRandomSeed(12);
        try (Model model = Model.newInstance("fused-collapse", "PyTorch");
                NDManager data = NDManager.newBaseManager("PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "mixed_float16");
            model.setBlock(block);
            Trainer trainer = model.newTrainer(configure(block, interval));
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
                amp.step(); // the reads before the collapse see an overflow and throw nothing
            }
            assertTrue(amp.getScaler().isStateOnDevice(), "the fused path keeps the state there");
            return assertThrows(LossScaleCollapsedException.class, trainer::close);
        }
    }

    private static AmpTrainingConfig configure(MixedPrecisionBlock block, int interval) {
        return Amp.configure(
                RealProgramsRig.sgd(0.1f),
                block,
                AmpOptions.builder()
                        .fusedOptimizer(FusedOptimizer.ON)
                        .hostSyncInterval(interval)
                        .build());
    }
}
