package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import java.io.IOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.function.BiConsumer;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The fused Nag's optimizer state, saved, is DJL's Nag's: loaded into DJL's own Nag (which cannot
 * step on PyTorch, but keeps the state) it is the velocity DJL's rule ({@link DjlNagRule}) holds
 * after the same steps, with a constant rate (the fused buffer is {@code -v / lr}) and with a
 * schedule (it is {@code -v}); saved again from DJL's Nag and resumed fused, training ends where
 * the unbroken fused run ends.
 */
class NagOptimizerStateTest {

    private static final int STEPS = 10;
    private static final int SAVED_AFTER = 5;
    private static final float MOMENTUM = 0.9f;

    private static final LossScaling SCALING =
            LossScaling.dynamicBuilder().initScale(1024f).growthInterval(3).build();

    /** A rate that changes at every update, so that a count off by one shows. */
    private static final Tracker EVERY_STEP_DIFFERENT = n -> 0.02f * (1f + (n % 5)) / 3f;

    @TempDir Path dir;

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void aFusedNagStateIsDjlsNagStateAndResumesFused(boolean scheduled) throws Exception {
        Tracker rate = scheduled ? EVERY_STEP_DIFFERENT : Tracker.fixed(0.05f);
        try (NDManager data = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(5);
            ToyTask task = new ToyTask(data);
            Map<String, Snapshots.Bits> straight =
                    run(task, nag(rate), FusedOptimizer.ON, null, null, STEPS, null, null);

            Map<String, float[]> djlRule = new HashMap<>();
            run(
                    task,
                    new DjlNagRule(Optimizer.nag(), rate, MOMENTUM),
                    FusedOptimizer.OFF,
                    null,
                    null,
                    SAVED_AFTER,
                    null,
                    (block, optimizer) ->
                            forEachParameter(
                                    block,
                                    (name, id) ->
                                            djlRule.put(
                                                    name,
                                                    ((DjlNagRule) optimizer)
                                                            .velocity(id)
                                                            .toFloatArray())));

            Path fused = dir.resolve("fused-" + scheduled);
            run(task, nag(rate), FusedOptimizer.ON, null, null, SAVED_AFTER, fused, null);

            Path djl = dir.resolve("djl-" + scheduled + ".optimizer");
            Optimizer djlNag = nag(rate);
            try (Model model = model()) {
                model.load(fused.getParent(), fused.getFileName().toString());
                try (Trainer trainer =
                        model.newTrainer(config(djlNag, FusedOptimizer.OFF, model))) {
                    AmpSession amp = AmpSession.of(trainer);
                    amp.loadOptimizerState(optimizerFile(fused));
                    Map<String, Map<Device, NDArray>> states = Snapshots.momentumStates(djlNag);
                    forEachParameter(
                            model.getBlock(),
                            (name, id) -> {
                                assertNotNull(states.get(id), name + " has DJL's momentum state");
                                assertClose(
                                        djlRule.get(name),
                                        states.get(id).values().iterator().next().toFloatArray(),
                                        "DJL's Nag velocity of " + name);
                            });
                    // the model stays the fused run's: nothing trained here
                    amp.saveOptimizerState(djl);
                }
            }
            Map<String, Snapshots.Bits> resumed =
                    run(task, nag(rate), FusedOptimizer.ON, fused, djl, STEPS, null, null);
            assertEquals(straight.keySet(), resumed.keySet());
            for (String name : straight.keySet()) {
                assertClose(
                        floats(straight.get(name)),
                        floats(resumed.get(name)),
                        "resumed through DJL's Nag: " + name);
            }
        }
    }

    private static Optimizer nag(Tracker rate) {
        return Optimizer.nag().setLearningRateTracker(rate).setMomentum(MOMENTUM).build();
    }

    /**
     * Trains the toy task from step 0 (or from {@link #SAVED_AFTER}, loading the model from {@code
     * load} and the optimizer state from {@code state}, or from beside the model) to {@code to};
     * saves both to {@code save}, hands block and optimizer to {@code atEnd}.
     */
    private static Map<String, Snapshots.Bits> run(
            ToyTask task,
            Optimizer optimizer,
            FusedOptimizer path,
            Path load,
            Path state,
            int to,
            Path save,
            BiConsumer<Block, Optimizer> atEnd)
            throws IOException, MalformedModelException {
        try (Model model = model()) {
            if (load != null) {
                model.load(load.getParent(), load.getFileName().toString());
            }
            try (Trainer trainer = model.newTrainer(config(optimizer, path, model))) {
                AmpSession amp = AmpSession.of(trainer);
                if (load == null) {
                    trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                } else {
                    amp.loadOptimizerState(state != null ? state : optimizerFile(load));
                }
                Map<String, Snapshots.Bits> before = Snapshots.weights(model.getBlock());
                for (int step = load == null ? 0 : SAVED_AFTER; step < to; step++) {
                    task.trainStep(trainer, step);
                }
                assertEquals(0, amp.getScaler().getSkippedSteps(), "every step applied");
                assertNotEquals(before, Snapshots.weights(model.getBlock()), "the steps trained");
                if (save != null) {
                    model.save(save.getParent(), save.getFileName().toString());
                    amp.saveOptimizerState(optimizerFile(save));
                }
                if (atEnd != null) {
                    atEnd.accept(model.getBlock(), optimizer);
                }
                return Snapshots.weights(model.getBlock());
            }
        }
    }

    private static void forEachParameter(Block block, BiConsumer<String, String> nameAndId) {
        for (Pair<String, Parameter> p : block.getParameters()) {
            nameAndId.accept(p.getKey(), p.getValue().getId());
        }
    }

    private static Path optimizerFile(Path model) {
        return model.resolveSibling(model.getFileName() + ".optimizer");
    }

    private static Model model() {
        Engine.getInstance().setRandomSeed(7);
        Model model = Model.newInstance("nag-state", "PyTorch");
        model.setBlock(Amp.wrap(Models.mlp(32, ToyTask.CLASSES), "mixed_float16"));
        return model;
    }

    private static AmpTrainingConfig config(Optimizer optimizer, FusedOptimizer path, Model model) {
        return Amp.configure(
                new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss()).optOptimizer(optimizer),
                model.getBlock(),
                AmpOptions.builder().lossScaling(SCALING).fusedOptimizer(path).build());
    }

    private static float[] floats(Snapshots.Bits bits) {
        float[] values = new float[bits.bits.length];
        for (int i = 0; i < values.length; i++) {
            values[i] = Float.intBitsToFloat(bits.bits[i]);
        }
        return values;
    }

    private static void assertClose(float[] expected, float[] actual, String what) {
        assertEquals(expected.length, actual.length, what);
        boolean moved = false;
        for (int i = 0; i < expected.length; i++) {
            moved |= expected[i] != 0f;
            assertEquals(
                    expected[i],
                    actual[i],
                    1e-5f * Math.max(1f, Math.abs(expected[i])),
                    what + "[" + i + "]");
        }
        assertTrue(moved, what + " is not all zero");
    }
}
