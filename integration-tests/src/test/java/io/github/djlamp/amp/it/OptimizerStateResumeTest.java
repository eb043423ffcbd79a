package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * DJL's {@code model.save} keeps no optimizer state: with {@code saveOptimizerState} beside it, a
 * run saved halfway and resumed in a new model and trainer ends bit for bit where the run without a
 * break ends, on DJL's own update and on the fused path, and a state saved on one path resumes on
 * the other.
 */
class OptimizerStateResumeTest {

    private static final int STEPS = 10;
    private static final int SAVED_AFTER = 5;

    /** Grows every 3 clean steps: the scaler state moves across the save too. */
    private static final LossScaling SCALING =
            LossScaling.dynamicBuilder().initScale(1024f).growthInterval(3).build();

    private static final List<Supplier<Optimizer>> OPTIMIZERS =
            List.of(
                    () -> Optimizer.sgd().setLearningRateTracker(Tracker.fixed(0.05f)).build(),
                    () ->
                            Optimizer.sgd()
                                    .setLearningRateTracker(Tracker.fixed(0.05f))
                                    .optMomentum(0.9f)
                                    .build(),
                    () ->
                            Optimizer.adam()
                                    .optLearningRateTracker(
                                            Tracker.factor()
                                                    .setBaseValue(0.01f)
                                                    .setFactor(0.9f)
                                                    .build())
                                    .build(),
                    () ->
                            Optimizer.adamW()
                                    .optLearningRateTracker(Tracker.fixed(0.01f))
                                    .optWeightDecays(0.01f)
                                    .build());

    @TempDir Path dir;

    @ParameterizedTest
    @EnumSource(
            value = FusedOptimizer.class,
            names = {"OFF", "ON"})
    void aResumedRunEndsBitForBitWhereTheUnbrokenRunEnds(FusedOptimizer path) throws Exception {
        try (NDManager data = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(5);
            ToyTask task = new ToyTask(data);
            for (Supplier<Optimizer> optimizer : OPTIMIZERS) {
                Map<String, Snapshots.Bits> straight =
                        run(task, optimizer.get(), path, null, 0, STEPS, null);
                assertEquals(
                        straight,
                        run(task, optimizer.get(), path, null, 0, STEPS, null),
                        "a run repeats bit for bit: what the comparison below needs");
                Map<String, Snapshots.Bits> resumed = savedAndResumed(task, optimizer, path, path);
                assertEquals(straight, resumed, "optimizer " + OPTIMIZERS.indexOf(optimizer));
            }
        }
    }

    @Test
    void aStateSavedOnOnePathResumesOnTheOther() throws Exception {
        try (NDManager data = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(5);
            ToyTask task = new ToyTask(data);
            for (Supplier<Optimizer> optimizer : OPTIMIZERS) {
                int index = OPTIMIZERS.indexOf(optimizer);
                for (FusedOptimizer from :
                        new FusedOptimizer[] {FusedOptimizer.ON, FusedOptimizer.OFF}) {
                    FusedOptimizer to =
                            from == FusedOptimizer.ON ? FusedOptimizer.OFF : FusedOptimizer.ON;
                    String what = "optimizer " + index + " saved " + from + ", resumed " + to;
                    Map<String, Snapshots.Bits> straight =
                            run(task, optimizer.get(), to, null, 0, STEPS, null);
                    // the two paths' own difference over the run: float rounding on the CPU,
                    // more on a GPU, where the fused step is PyTorch's CUDA kernel
                    Map<String, Snapshots.Bits> otherPath =
                            run(task, optimizer.get(), from, null, 0, STEPS, null);
                    Map<String, Snapshots.Bits> resumed =
                            savedAndResumed(task, optimizer, from, to, true);
                    Excess resumedExcess = worstExcess(straight, resumed, otherPath, what);
                    System.out.println("resumed: " + resumedExcess);
                    assertTrue(resumedExcess.ratio() <= 1, resumedExcess.toString());
                    if (index == 0) {
                        // plain SGD keeps no state: there is nothing to lose in the transfer
                        continue;
                    }
                    // the bound still catches a transfer that loses the state: a resume from the
                    // same weights with a fresh optimizer and scaler ends far outside it (on the
                    // CPU, 2026-11-26: resumes within 0.17 of the bound, lost states 3e3 to 2e4
                    // times it)
                    Map<String, Snapshots.Bits> stateLost =
                            savedAndResumed(task, optimizer, from, to, false);
                    Excess lost = worstExcess(straight, stateLost, otherPath, what);
                    System.out.println("state lost: " + lost);
                    assertTrue(lost.ratio() > 10, "the state lost, and only " + lost);
                }
            }
        }
    }

    @Test
    void aStateThatDoesNotFitIsRefusedWithTheReason() throws Exception {
        try (NDManager data = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(5);
            ToyTask task = new ToyTask(data);
            Path adam = dir.resolve("adam");
            run(task, OPTIMIZERS.get(2).get(), FusedOptimizer.OFF, null, 0, 2, adam);
            AmpException wrongOptimizer =
                    assertThrows(
                            AmpException.class,
                            () ->
                                    run(
                                            task,
                                            OPTIMIZERS.get(1).get(),
                                            FusedOptimizer.OFF,
                                            adam,
                                            2,
                                            3,
                                            null));
            assertTrue(
                    wrongOptimizer
                            .getMessage()
                            .contains(
                                    "is Adam's, but the trainer's optimizer"
                                            + " is Sgd with momentum"),
                    wrongOptimizer.getMessage());
            try (Model model = model();
                    Trainer trainer =
                            model.newTrainer(
                                    config(OPTIMIZERS.get(2).get(), FusedOptimizer.ON, model))) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                AmpException missing =
                        assertThrows(
                                AmpException.class,
                                () ->
                                        AmpSession.of(trainer)
                                                .loadOptimizerState(dir.resolve("none")));
                assertTrue(
                        missing.getMessage().contains("No optimizer state at"),
                        missing.getMessage());
                task.trainStep(trainer, 0);
                AmpException late =
                        assertThrows(
                                AmpException.class,
                                () ->
                                        AmpSession.of(trainer)
                                                .loadOptimizerState(optimizerFile(adam)));
                assertTrue(
                        late.getMessage().contains("before the trainer's first step"),
                        late.getMessage());
            }
        }
    }

    /** Trains until the save on one path, then resumes from the files on another. */
    private Map<String, Snapshots.Bits> savedAndResumed(
            ToyTask task,
            Supplier<Optimizer> optimizer,
            FusedOptimizer saving,
            FusedOptimizer resuming)
            throws IOException, ai.djl.MalformedModelException {
        return savedAndResumed(task, optimizer, saving, resuming, true);
    }

    /**
     * Trains until the save on one path, then resumes from the files on another; without {@code
     * withState}, from the model file only: a fresh optimizer and loss scaler.
     */
    private Map<String, Snapshots.Bits> savedAndResumed(
            ToyTask task,
            Supplier<Optimizer> optimizer,
            FusedOptimizer saving,
            FusedOptimizer resuming,
            boolean withState)
            throws IOException, ai.djl.MalformedModelException {
        Path saved = dir.resolve(saving + "-" + resuming + "-" + OPTIMIZERS.indexOf(optimizer));
        run(task, optimizer.get(), saving, null, 0, SAVED_AFTER, saved);
        return run(task, optimizer.get(), resuming, saved, withState, SAVED_AFTER, STEPS, null);
    }

    private static Map<String, Snapshots.Bits> run(
            ToyTask task,
            Optimizer optimizer,
            FusedOptimizer path,
            Path load,
            int from,
            int to,
            Path save)
            throws IOException, ai.djl.MalformedModelException {
        return run(task, optimizer, path, load, true, from, to, save);
    }

    /**
     * Trains steps [from, to) of the toy task; loads the model and, with {@code loadState}, the
     * optimizer state from {@code load} first, saves both to {@code save} at the end.
     */
    private static Map<String, Snapshots.Bits> run(
            ToyTask task,
            Optimizer optimizer,
            FusedOptimizer path,
            Path load,
            boolean loadState,
            int from,
            int to,
            Path save)
            throws IOException, ai.djl.MalformedModelException {
        try (Model model = model()) {
            if (load != null) {
                model.load(load.getParent(), load.getFileName().toString());
            }
            try (Trainer trainer = model.newTrainer(config(optimizer, path, model))) {
                AmpSession amp = AmpSession.of(trainer);
                if (load == null) {
                    trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                } else if (loadState) {
                    amp.loadOptimizerState(optimizerFile(load));
                }
                Map<String, Snapshots.Bits> before = Snapshots.weights(model.getBlock());
                for (int step = from; step < to; step++) {
                    task.trainStep(trainer, step);
                }
                assertEquals(0, amp.getScaler().getSkippedSteps(), "every step applied");
                assertNotEquals(before, Snapshots.weights(model.getBlock()), "the steps trained");
                if (save != null) {
                    model.save(save.getParent(), save.getFileName().toString());
                    amp.saveOptimizerState(optimizerFile(save));
                }
                return Snapshots.weights(model.getBlock());
            }
        }
    }

    private static Path optimizerFile(Path model) {
        return model.resolveSibling(model.getFileName() + ".optimizer");
    }

    private static Model model() {
        Engine.getInstance().setRandomSeed(7);
        Model model = Model.newInstance("resume-optimizer", "PyTorch");
        model.setBlock(Amp.wrap(Models.mlp(32, ToyTask.CLASSES), "mixed_float16"));
        return model;
    }

    private static AmpTrainingConfig config(Optimizer optimizer, FusedOptimizer path, Model model) {
        return Amp.configure(
                new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss()).optOptimizer(optimizer),
                model.getBlock(),
                AmpOptions.builder().lossScaling(SCALING).fusedOptimizer(path).build());
    }

    /** The worst ratio of a distance to its bound, and where it is. */
    private record Excess(double ratio, String where) {
        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%.3g times the bound at %s", ratio, where);
        }
    }

    /**
     * The worst ratio of {@code actual}'s distance from {@code expected} to its bound: 1e-5
     * (relative above 1) plus twice the largest difference between the two paths' straight runs
     * ({@code expected} and {@code otherPath}) in that parameter. On the CPU the paths differ by
     * float rounding at most; on a GPU the fused step is PyTorch's CUDA kernel, whose rounding
     * differs from DJL's update and grows over the steps. Above 1, some value is outside.
     */
    private static Excess worstExcess(
            Map<String, Snapshots.Bits> expected,
            Map<String, Snapshots.Bits> actual,
            Map<String, Snapshots.Bits> otherPath,
            String what) {
        assertEquals(expected.keySet(), actual.keySet());
        Excess worst = new Excess(0, what + ": every value equal");
        for (String name : expected.keySet()) {
            int[] want = expected.get(name).bits;
            int[] got = actual.get(name).bits;
            int[] other = otherPath.get(name).bits;
            float pathDifference = 0f;
            for (int i = 0; i < want.length; i++) {
                pathDifference =
                        Math.max(
                                pathDifference,
                                Math.abs(
                                        Float.intBitsToFloat(want[i])
                                                - Float.intBitsToFloat(other[i])));
            }
            for (int i = 0; i < want.length; i++) {
                float w = Float.intBitsToFloat(want[i]);
                float g = Float.intBitsToFloat(got[i]);
                double bound = 1e-5 * Math.max(1f, Math.abs(w)) + 2.0 * pathDifference;
                double excess = Float.isNaN(g) ? Double.POSITIVE_INFINITY : Math.abs(g - w) / bound;
                if (excess > worst.ratio()) {
                    worst =
                            new Excess(
                                    excess,
                                    String.format(
                                            Locale.ROOT,
                                            "%s %s[%d]: expected %s, was %s, bound %.3g (the paths"
                                                    + " differ by up to %.3g there)",
                                            what,
                                            name,
                                            i,
                                            w,
                                            g,
                                            bound,
                                            pathDifference));
                }
            }
        }
        return worst;
    }
}
