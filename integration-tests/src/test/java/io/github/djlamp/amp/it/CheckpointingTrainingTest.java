package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Training with checkpointing ends where training without it ends, bitwise on the CPU, through
 * EasyTrain's batch-and-step loop: fp16 with dynamic scaling and an overflowing batch (skipped in
 * both runs alike), with gradient accumulation, on DJL's per-parameter update and on the fused step
 * with the scaler's state on the device; and a custom loop that steps the trainer directly with
 * segments left to recompute is refused before any weight changes.
 */
class CheckpointingTrainingTest {

    private static final int BATCHES = 6;
    private static final int POISONED = 2;

    /** Every parameter (running statistics included) after the run, and the skipped steps. */
    static List<float[]> train(
            String policy, Checkpointing checkpointing, FusedOptimizer fused, int accumulation) {
        Engine.getInstance().setRandomSeed(5);
        List<float[]> result = new ArrayList<>();
        try (Model model = Model.newInstance("checkpointing", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(CheckpointingGradientTest.network(), policy);
            model.setBlock(block);
            AmpOptions options =
                    AmpOptions.builder()
                            .checkpointing(checkpointing)
                            .fusedOptimizer(fused)
                            .accumulationSteps(accumulation)
                            .hostSyncInterval(2)
                            .lossScaling(
                                    policy.equals("mixed_float16")
                                            ? LossScaling.dynamicBuilder().initScale(256f).build()
                                            : null)
                            .build();
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.adam()
                                            .optLearningRateTracker(Tracker.fixed(0.01f))
                                            .build());
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options))) {
                trainer.initialize(new Shape(4, 3, 8, 8));
                for (int i = 0; i < BATCHES; i++) {
                    NDManager m = trainer.getManager().newSubManager();
                    NDArray x = m.arange(4f * 3 * 8 * 8).reshape(4, 3, 8, 8).div(100f + i).sin();
                    if (i == POISONED && policy.equals("mixed_float16")) {
                        x = x.mul(1e5f); // overflows fp16 activations: the step is skipped
                    }
                    NDArray y = m.create(new float[] {i % 5, (i + 1) % 5, (i + 2) % 5, 0});
                    Batch batch = new Batch(m, new NDList(x), new NDList(y), 4, null, null, i, 1);
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                    batch.close();
                }
                AmpSession amp = AmpSession.of(trainer);
                result.add(new float[] {amp.getScaler().getSkippedSteps()});
                for (Pair<String, Parameter> pair : block.getParameters()) {
                    result.add(pair.getValue().getArray().toFloatArray());
                }
            }
        }
        return result;
    }

    @ParameterizedTest
    @CsvSource({
        "float32, OFF, 1",
        "mixed_bfloat16, OFF, 2",
        "mixed_float16, OFF, 1",
        "mixed_float16, ON, 1",
        "mixed_float16, ON, 2"
    })
    void checkpointedTrainingEndsBitwiseWhereTrainingWithoutEnds(
            String policy, FusedOptimizer fused, int accumulation) {
        List<float[]> plain = train(policy, Checkpointing.none(), fused, accumulation);
        List<float[]> checkpointed = train(policy, Checkpointing.every(2), fused, accumulation);
        if (policy.equals("mixed_float16")) {
            assertTrue(plain.get(0)[0] >= 1, "the poisoned batch was skipped");
        }
        assertEquals(plain.size(), checkpointed.size());
        for (int i = 0; i < plain.size(); i++) {
            assertArrayEquals(plain.get(i), checkpointed.get(i), policy + " array " + i);
        }
    }

    @Test
    void steppingTheTrainerWithSegmentsLeftToRecomputeIsRefusedBeforeAnyChange() {
        Engine.getInstance().setRandomSeed(5);
        try (Model model = Model.newInstance("checkpointing", "PyTorch")) {
            MixedPrecisionBlock block =
                    Amp.wrap(CheckpointingGradientTest.network(), "mixed_bfloat16");
            model.setBlock(block);
            AmpOptions options =
                    AmpOptions.builder()
                            .checkpointing(Checkpointing.stages())
                            .fusedOptimizer(FusedOptimizer.OFF)
                            .build();
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build());
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options));
                    NDManager step = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(4, 3, 8, 8));
                NDArray x = step.arange(4f * 3 * 8 * 8).reshape(4, 3, 8, 8).div(300f).sin();
                NDArray y = step.create(new float[] {0, 1, 2, 3});
                for (int i = 0; i < 2; i++) {
                    try (GradientCollector collector = trainer.newGradientCollector()) {
                        collector.backward(
                                trainer.getLoss()
                                        .evaluate(new NDList(y), trainer.forward(new NDList(x))));
                    }
                    if (i == 0) {
                        // DJL's own first-step check would see the first layers' gradients
                        // still zero and blame a missing backward: step the first one right
                        AmpSession.of(trainer).step();
                    }
                }
                float[] before = block.getParameters().get(0).getValue().getArray().toFloatArray();
                IllegalStateException e = assertThrows(IllegalStateException.class, trainer::step);
                assertTrue(
                        e.getMessage().contains("AmpSession.of(trainer).step()"), e.getMessage());
                assertArrayEquals(
                        before, block.getParameters().get(0).getValue().getArray().toFloatArray());
                AmpSession.of(trainer).step(); // the way out: recomputes, then steps
                assertTrue(
                        block.getTrainingLink().getCheckpoints().getRecomputedSegments() > 0,
                        "recomputed at the step");
            }
        }
    }
}
