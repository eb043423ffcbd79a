package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
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
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.LossScalingOptimizer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;

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

    /** every(2) over the network's 9 stages. */
    private static final int SEGMENTS = 5;

    /**
     * Everything a step may change, by parameter name (ids differ between runs), bitwise: every
     * parameter (running statistics included) and the optimizer's state, DJL's Adam's or the fused
     * step's.
     */
    record State(Map<String, Snapshots.Bits> parameters, Map<String, Object> optimizer) {

        static State of(MixedPrecisionBlock block, LossScalingOptimizer optimizer) {
            Map<String, Object> state = new TreeMap<>();
            Snapshots.AdamState adam = Snapshots.adam(optimizer.getInner());
            state.put("numUpdate", adam.numUpdate);
            for (Pair<String, Parameter> pair : block.getParameters()) {
                String id = pair.getValue().getId();
                String name = pair.getKey();
                for (Map.Entry<String, Snapshots.Bits> e : adam.means.entrySet()) {
                    if (e.getKey().startsWith(id + "@")) {
                        state.put(name + " mean", e.getValue());
                    }
                }
                for (Map.Entry<String, Snapshots.Bits> e : adam.variances.entrySet()) {
                    if (e.getKey().startsWith(id + "@")) {
                        state.put(name + " variance", e.getValue());
                    }
                }
                if (adam.updateCounts.containsKey(id)) {
                    state.put(name + " updates", adam.updateCounts.get(id));
                }
                NDList buffers = optimizer.getFusedState(id);
                for (int b = 0; b < buffers.size(); b++) {
                    state.put(name + " fused#" + b, Snapshots.Bits.of(buffers.get(b)));
                }
            }
            NDArray count = optimizer.getFusedStepCount();
            if (count != null) {
                state.put(
                        "fused step count",
                        Snapshots.Bits.of(count.toType(DataType.FLOAT32, true)));
            }
            return new State(Snapshots.weights(block), state);
        }
    }

    /** What one run leaves: the final state, the skipped steps, the segments recomputed. */
    record Run(
            State end,
            State beforePoisonedWindow,
            State afterPoisonedWindow,
            State afterFirstStep,
            long skippedSteps,
            long recomputed) {}

    static Run train(
            String policy, Checkpointing checkpointing, FusedOptimizer fused, int accumulation) {
        Engine.getInstance().setRandomSeed(5);
        try (Model model = Model.newInstance("checkpointing", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(CheckpointingGradientTest.network(), policy);
            model.setBlock(block);
            AmpOptions options =
                    CheckpointingSetUp.options(policy, checkpointing)
                            .fusedOptimizer(fused)
                            .accumulationSteps(accumulation)
                            .hostSyncInterval(2)
                            .build();
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.adam()
                                            .optLearningRateTracker(Tracker.fixed(0.01f))
                                            .build());
            AmpTrainingConfig ampConfig = Amp.configure(config, block, options);
            LossScalingOptimizer optimizer = (LossScalingOptimizer) ampConfig.getOptimizer();
            try (Trainer trainer = model.newTrainer(ampConfig)) {
                trainer.initialize(new Shape(4, 3, 8, 8));
                // the poisoned batch's accumulation window: [POISONED, lastOfWindow]
                int lastOfWindow = POISONED + accumulation - 1;
                State before = null;
                State after = null;
                State first = null;
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
                    if (i == accumulation - 1) {
                        first = State.of(block, optimizer);
                    }
                    if (i == POISONED - 1) {
                        before = State.of(block, optimizer);
                    }
                    if (i == lastOfWindow) {
                        after = State.of(block, optimizer);
                    }
                }
                AmpSession amp = AmpSession.of(trainer);
                return new Run(
                        State.of(block, optimizer),
                        before,
                        after,
                        first,
                        amp.getScaler().getSkippedSteps(),
                        block.getTrainingLink().getCheckpoints().getRecomputedSegments());
            }
        }
    }

    @ParameterizedTest
    @CsvSource({
        "float32, OFF, 1",
        "mixed_bfloat16, OFF, 2",
        "mixed_float16, OFF, 1",
        "mixed_float16, OFF, 2",
        "mixed_float16, ON, 1",
        "mixed_float16, ON, 2"
    })
    void checkpointedTrainingEndsBitwiseWhereTrainingWithoutEnds(
            String policy, FusedOptimizer fused, int accumulation) {
        Run plain = train(policy, Checkpointing.none(), fused, accumulation);
        Run checkpointed = train(policy, Checkpointing.every(2), fused, accumulation);
        assertEquals(0, plain.recomputed());
        assertEquals(
                BATCHES * SEGMENTS,
                checkpointed.recomputed(),
                "every batch's segments were recomputed");
        assertNotEquals(
                plain.afterFirstStep().parameters(),
                plain.end().parameters(),
                "training moves the weights");
        assertEquals(plain.skippedSteps(), checkpointed.skippedSteps(), "skipped steps");
        if (policy.equals("mixed_float16")) {
            assertEquals(1, plain.skippedSteps(), "the poisoned batch's step was skipped");
            for (Run run : new Run[] {plain, checkpointed}) {
                State before = run.beforePoisonedWindow();
                State after = run.afterPoisonedWindow();
                assertEquals(before.parameters(), after.parameters(), "weights and statistics");
                assertEquals(before.optimizer(), after.optimizer(), "the optimizer's state");
            }
        } else {
            assertEquals(0, plain.skippedSteps());
        }
        assertState(plain.afterFirstStep(), checkpointed.afterFirstStep(), policy + " first step");
        assertState(plain.end(), checkpointed.end(), policy + " end");
    }

    private static void assertState(State plain, State checkpointed, String what) {
        assertEquals(plain.parameters().keySet(), checkpointed.parameters().keySet());
        for (String name : plain.parameters().keySet()) {
            assertEquals(
                    plain.parameters().get(name),
                    checkpointed.parameters().get(name),
                    what + ": " + name);
        }
        assertEquals(plain.optimizer(), checkpointed.optimizer(), what + ": optimizer state");
    }

    /**
     * Two custom-loop steps of a checkpointed bf16 model; with {@code tryTrainerStep} the second is
     * first tried with {@code trainer.step()}, which must be refused before any change. Returns the
     * weights before the refused call, after it, and at the end.
     */
    static List<Map<String, Snapshots.Bits>> customLoop(
            FusedOptimizer fused, boolean tryTrainerStep) {
        Engine.getInstance().setRandomSeed(5);
        List<Map<String, Snapshots.Bits>> result = new ArrayList<>();
        try (Model model = Model.newInstance("checkpointing", "PyTorch")) {
            MixedPrecisionBlock block =
                    Amp.wrap(CheckpointingGradientTest.network(), "mixed_bfloat16");
            model.setBlock(block);
            AmpOptions options =
                    AmpOptions.builder()
                            .checkpointing(Checkpointing.stages())
                            .fusedOptimizer(fused)
                            .build();
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .optMomentum(0.9f)
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
                    if (i == 1 && tryTrainerStep) {
                        Map<String, Snapshots.Bits> before = Snapshots.weights(block);
                        IllegalStateException e =
                                assertThrows(IllegalStateException.class, trainer::step);
                        assertTrue(
                                e.getMessage().contains("AmpSession.of(trainer).step()"),
                                e.getMessage());
                        result.add(before);
                        result.add(Snapshots.weights(block));
                    }
                    // the first step always through the session: DJL's own first-step check
                    // would see the first layers' gradients still zero and blame a missing
                    // backward
                    AmpSession.of(trainer).step(); // the way out: recomputes, then steps
                }
                assertEquals(
                        2L * 9,
                        block.getTrainingLink().getCheckpoints().getRecomputedSegments(),
                        "both steps recomputed their 9 segments");
                result.add(Snapshots.weights(block));
            }
        }
        return result;
    }

    @ParameterizedTest
    @EnumSource(
            value = FusedOptimizer.class,
            names = {"OFF", "ON"})
    void steppingTheTrainerWithSegmentsLeftToRecomputeIsRefusedBeforeAnyChange(
            FusedOptimizer fused) {
        List<Map<String, Snapshots.Bits>> refused = customLoop(fused, true);
        assertEquals(refused.get(0), refused.get(1), "no weight changed by the refused step");
        // nothing half-done either: the steps after it end where they end without it
        assertEquals(customLoop(fused, false).get(0), refused.get(2), "the weights at the end");
        assertNotEquals(refused.get(0), refused.get(2), "the step after the refusal trains");
    }
}
