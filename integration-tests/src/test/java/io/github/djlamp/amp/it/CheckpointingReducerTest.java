package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.train.AmpSession;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The data-parallel reducer ({@code AmpSession.setGradientReducer}, what amp-distributed's MPI
 * reducer plugs into) is handed complete gradients: the checkpointed segments are recomputed before
 * it runs, so it sees, bitwise, what it sees without checkpointing, and what it leaves in place is
 * what the step uses. A fake reducer stands in for MPI: it records what it is handed and halves it
 * (the mean with a second process whose gradients are zero).
 */
class CheckpointingReducerTest {

    private static final int STEPS = 3;

    /** What the reducer was handed, call by call, and the weights at the end. */
    record Run(List<List<float[]>> seen, Map<String, Snapshots.Bits> weights, long recomputed) {}

    static Run train(
            String policy, Checkpointing checkpointing, boolean easyTrain, int accumulation) {
        Engine.getInstance().setRandomSeed(11);
        List<List<float[]>> seen = new ArrayList<>();
        try (Model model = Model.newInstance("checkpointing-reducer", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(CheckpointingGradientTest.network(), policy);
            model.setBlock(block);
            AmpOptions options =
                    CheckpointingSetUp.options(policy, checkpointing)
                            .accumulationSteps(accumulation)
                            .build();
            DefaultTrainingConfig config = CheckpointingSetUp.sgd(0.1f);
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options))) {
                trainer.initialize(new Shape(4, 3, 8, 8));
                AmpSession amp = AmpSession.of(trainer);
                amp.setGradientReducer(
                        (gradients, stepManager) -> {
                            List<float[]> copies = new ArrayList<>();
                            for (NDArray g : gradients.byReplica().get(0)) {
                                copies.add(g.toFloatArray());
                                g.muli(0.5f);
                            }
                            seen.add(copies);
                        });
                for (int i = 0; i < STEPS * accumulation; i++) {
                    NDManager m = trainer.getManager().newSubManager();
                    NDArray x = m.arange(4f * 3 * 8 * 8).reshape(4, 3, 8, 8).div(200f + i).sin();
                    NDArray y = m.create(new float[] {i % 5, (i + 1) % 5, (i + 2) % 5, 0});
                    if (easyTrain) {
                        Batch batch =
                                new Batch(m, new NDList(x), new NDList(y), 4, null, null, i, 1);
                        EasyTrain.trainBatch(trainer, batch);
                        trainer.step();
                        batch.close();
                    } else {
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            NDArray loss =
                                    trainer.getLoss()
                                            .evaluate(
                                                    new NDList(y), trainer.forward(new NDList(x)));
                            collector.backward(loss); // trainer.getLoss() scales it
                        }
                        amp.step();
                        m.close();
                    }
                }
                return new Run(
                        seen,
                        Snapshots.weights(block),
                        block.getTrainingLink().getCheckpoints().getRecomputedSegments());
            }
        }
    }

    @ParameterizedTest
    @CsvSource({
        "mixed_float16, false, 1",
        "mixed_bfloat16, false, 1",
        "mixed_float16, true, 2",
        "float32, true, 1"
    })
    void theReducerIsHandedTheRecomputedGradients(
            String policy, boolean easyTrain, int accumulation) {
        Run plain = train(policy, Checkpointing.none(), easyTrain, accumulation);
        Run checkpointed = train(policy, Checkpointing.stages(), easyTrain, accumulation);
        assertEquals(9L * STEPS * accumulation, checkpointed.recomputed(), "segments recomputed");
        assertEquals(STEPS, plain.seen().size(), "one reduction a step");
        assertEquals(STEPS, checkpointed.seen().size(), "one reduction a step");
        for (int s = 0; s < STEPS; s++) {
            List<float[]> expected = plain.seen().get(s);
            List<float[]> actual = checkpointed.seen().get(s);
            assertEquals(expected.size(), actual.size());
            assertTrue(expected.size() >= 8, "every trainable parameter: " + expected.size());
            boolean firstNonZero = false;
            for (float v : expected.get(0)) {
                firstNonZero |= v != 0f;
            }
            assertTrue(firstNonZero, "the first layer's gradient is not zero");
            for (int g = 0; g < expected.size(); g++) {
                assertArrayEquals(
                        expected.get(g), actual.get(g), policy + " step " + s + " gradient " + g);
            }
        }
        // the step used what the reducer left: both runs halved the same gradients
        assertEquals(plain.weights(), checkpointed.weights(), "the weights at the end");
    }
}
