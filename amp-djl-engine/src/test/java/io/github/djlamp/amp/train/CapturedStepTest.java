package io.github.djlamp.amp.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.pooling.Pool;
import ai.djl.nn.recurrent.LSTM;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.capture.CapturedStep;
import io.github.djlamp.amp.capture.StepBody;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.spi.StepGraph;
import io.github.djlamp.amp.spi.StepGraphs;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The captured step's plan, without a GPU: when it captures, what it copies into the arrays a graph
 * reads, what it returns, what a replay leaves the host to count, and where it refuses. The graphs
 * are stand-ins: one runs the captured region again at each replay (so results can be compared with
 * eager steps: it fails when a batch is not copied where the graph reads it, or when the results
 * are not where a replay leaves them), one replays nothing (so only the host's bookkeeping moves).
 * Whether libtorch's CUDA graphs replay the same step bitwise is {@code
 * CapturedTrainingStepProbeTest}'s and {@code CapturedStepGpuTest}'s, on a GPU.
 */
class CapturedStepTest {

    private static final int BATCH = 4;
    private static final int WARM_UP = 3;
    private static final int STEPS = 8;

    /** Whether a stand-in is capturing: a reading body fails then, as under CUDA. */
    private static final ThreadLocal<Boolean> CAPTURING = ThreadLocal.withInitial(() -> false);

    /** Whether batches are channels-last in memory, as DJL's image pipelines make them. */
    private static final ThreadLocal<Boolean> CHANNELS_LAST = ThreadLocal.withInitial(() -> false);

    /** The block being trained, whose state a failed stand-in capture puts back. */
    private static final ThreadLocal<Block> PARAMETERS = new ThreadLocal<>();

    @ParameterizedTest
    @CsvSource({"mixed_float16, sgd", "mixed_bfloat16, adam", "float32, sgd"})
    void replayedStepsEndWhereEagerStepsEnd(String policy, String optimizer) {
        Setup setup = Setup.of(policy, optimizer);
        StandInStepGraphs.Rerun graphs = new StandInStepGraphs.Rerun();
        Run captured = train(setup.on(graphs));
        assertEquals(CapturedStep.State.REPLAYING, captured.state, captured.refusal);
        assertEquals(1, graphs.captures);
        assertEquals(STEPS - WARM_UP - 1, graphs.replays);
        assertEquals(STEPS - WARM_UP - 1, captured.replays);
        assertSameStates(train(setup), captured);
    }

    /**
     * DJL's image pipelines (ToTensor transposes each HWC image) give batches that are
     * channels-last in memory; the static arrays a graph reads keep that layout, so the
     * convolutions of a replay are the eager steps' kernels, bitwise.
     */
    @ParameterizedTest
    @CsvSource({"float32, sgd", "mixed_bfloat16, adam"})
    void aChannelsLastBatchIsReplayedInItsOwnLayout(String policy, String optimizer) {
        CHANNELS_LAST.set(true);
        try {
            Setup setup = Setup.of(policy, optimizer);
            StandInStepGraphs.Rerun graphs = new StandInStepGraphs.Rerun();
            Run captured = train(setup.on(graphs));
            assertEquals(CapturedStep.State.REPLAYING, captured.state, captured.refusal);
            assertSameStates(train(setup), captured);
        } finally {
            CHANNELS_LAST.set(false);
        }
    }

    /**
     * The first replay is checked against the same batch run eagerly from the same state: a graph
     * whose replay leaves the state as it was (as a graph gone wrong would) ends capturing at once,
     * and the run ends where the eager loop's ends, every step's state included.
     */
    @ParameterizedTest
    @CsvSource({"mixed_float16, sgd", "mixed_bfloat16, adam"})
    void aFirstReplayThatIsNotTheStepEndsCapturing(String policy, String optimizer) {
        Setup setup = Setup.of(policy, optimizer);
        StandInStepGraphs.Inert graphs = new StandInStepGraphs.Inert();
        Run run = train(setup.on(graphs));
        assertEquals(CapturedStep.State.EAGER, run.state);
        assertTrue(run.refusal.contains("its first replay is not the step"), run.refusal);
        assertEquals(1, graphs.replays, "only the checked replay");
        assertSameStates(train(setup), run);
    }

    /**
     * A step with dropout is checked too where the graphs put the random-number generator back
     * between the replay and the eager step (libtorch's CUDA generator offset): both draw the same
     * masks and the replay stands. Where the generator is not put back, the two draw different
     * masks and the check ends capturing, which shows that it compared them.
     */
    @ParameterizedTest
    @CsvSource({"mixed_bfloat16, adam", "float32, sgd"})
    void aStepWithDropoutIsCheckedWhereTheGraphsRepeatItsDraws(String policy, String optimizer) {
        Setup setup = Setup.of(policy, optimizer).withDropout();
        StandInStepGraphs.RepeatingDraws repeating = new StandInStepGraphs.RepeatingDraws(true);
        Run checked = train(setup.on(repeating));
        assertEquals(CapturedStep.State.REPLAYING, checked.state, checked.refusal);
        assertEquals(STEPS - WARM_UP - 1, repeating.replays);
        Run notPutBack = train(setup.on(new StandInStepGraphs.RepeatingDraws(false)));
        assertEquals(CapturedStep.State.EAGER, notPutBack.state);
        assertTrue(
                notPutBack.refusal.contains("its first replay is not the step"),
                notPutBack.refusal);
    }

    /**
     * Dropout between an LSTM's layers is drawn inside the engine's recurrent kernel (cuDNN keeps
     * its own random state), which no graph puts back: the first replay is not checked, even by
     * graphs that put the default generator back, and the run ends where the eager loop's ends.
     */
    @Test
    void recurrentDropoutLeavesTheFirstReplayUnchecked() {
        Setup setup = Setup.of("float32", "sgd").withRecurrentDropout();
        StandInStepGraphs.RepeatingDraws repeating = new StandInStepGraphs.RepeatingDraws(true);
        Run captured = train(setup.on(repeating));
        assertEquals(CapturedStep.State.REPLAYING, captured.state, captured.refusal);
        assertEquals(STEPS - WARM_UP - 1, repeating.replays, "no checked replay");
        assertEquals(0, repeating.saves, "the generator's position never saved");
        assertSameStates(train(setup), captured);
    }

    /**
     * A replay runs none of the step's Java code: the scaler's step count and its host reads every
     * {@code hostSyncInterval} steps must still follow the steps, as an eager run's do.
     */
    @Test
    void aReplayAdvancesWhatTheHostCounts() {
        Setup setup = Setup.of("mixed_float16", "sgd");
        Run eager = train(setup);
        Run replayed = train(setup.on(new StandInStepGraphs.NoReplay()));
        assertEquals(CapturedStep.State.REPLAYING, replayed.state, replayed.refusal);
        assertEquals(STEPS, eager.scalerSteps);
        assertEquals(STEPS, replayed.scalerSteps);
        assertEquals(eager.hostReads, replayed.hostReads, "one host read every 2 steps");
        assertTrue(replayed.hostReads >= STEPS / 2, "reads: " + replayed.hostReads);
    }

    /** The last, partial batch runs eagerly on its own arrays; full batches replay again after. */
    @Test
    void aBatchOfOtherShapesRunsEagerly() {
        Setup setup = Setup.of("mixed_float16", "sgd").withSizes(i -> i == 5 ? 3 : BATCH);
        Run captured = train(setup.on(new StandInStepGraphs.Rerun()));
        assertEquals(CapturedStep.State.REPLAYING, captured.state);
        assertEquals(STEPS - WARM_UP - 2, captured.replays);
        assertSameStates(train(setup), captured);
    }

    @Test
    void aCaptureTheRuntimeInvalidatedRunsTheStepAgainEagerly() {
        Setup setup = Setup.of("mixed_float16", "sgd");
        Run invalidated = train(setup.on(new StandInStepGraphs.Invalidated()));
        assertEquals(CapturedStep.State.EAGER, invalidated.state);
        assertTrue(invalidated.refusal.contains("invalidated the capture"), invalidated.refusal);
        assertSameStates(train(setup), invalidated);
    }

    /**
     * A capture the runtime invalidates only at its end ran the step's Java code once already: the
     * scaler counted the step and moved its read schedule. The step then runs again eagerly, and
     * must be counted once. The stand-in runs the region's device work too, which a CUDA capture
     * does not, so only what the host counts is compared with the eager loop's.
     */
    @Test
    void aCaptureInvalidatedAtItsEndCountsItsStepOnce() {
        Setup setup = Setup.of("mixed_float16", "sgd");
        Run eager = train(setup);
        Run invalidated = train(setup.on(new StandInStepGraphs.InvalidatedAtTheEnd()));
        assertEquals(CapturedStep.State.EAGER, invalidated.state);
        assertTrue(invalidated.refusal.contains("invalidated the capture"), invalidated.refusal);
        assertEquals(STEPS, eager.scalerSteps);
        assertEquals(eager.scalerSteps, invalidated.scalerSteps, "steps counted");
        assertEquals(eager.hostReads, invalidated.hostReads, "scheduled host reads");
    }

    /**
     * A host read inside the captured region fails there (CUDA refuses it while capturing); the
     * step runs again eagerly, the failure named.
     */
    @Test
    void aHostReadInTheBodyEndsCapturingNotTraining() {
        Setup setup = Setup.of("mixed_float16", "sgd").withReading();
        Run failed = train(setup.on(new ReadRefusingGraphs()));
        assertEquals(CapturedStep.State.EAGER, failed.state);
        assertTrue(failed.refusal.contains("operation not permitted when stream is capturing"));
        assertSameStates(train(setup), failed);
    }

    /**
     * Nothing djl-amp does inside the captured region reads a device value on the host (a read
     * there ends a CUDA capture): not even with the scaler's state read every step, the worst case,
     * where every read must fall between steps.
     */
    @ParameterizedTest
    @CsvSource({"mixed_float16, 1", "mixed_float16, 3", "mixed_bfloat16, 1"})
    void djlAmpReadsNothingOnTheHostInsideTheRegion(String policy, int hostSyncInterval) {
        StandInStepGraphs.ReadCounting graphs = new StandInStepGraphs.ReadCounting();
        Setup setup =
                new Setup(
                        policy,
                        "adam",
                        options(hostSyncInterval),
                        STEPS,
                        i -> BATCH,
                        false,
                        Draws.NONE);
        Run run = train(setup.on(graphs));
        assertEquals(CapturedStep.State.REPLAYING, run.state, run.refusal);
        assertEquals(STEPS - WARM_UP, graphs.regions, "the capture and every replay");
        assertEquals(0, graphs.readsInside, "djl-amp's host reads inside the region");
        if (policy.equals("mixed_float16")) {
            assertTrue(run.hostReads >= STEPS / hostSyncInterval, "reads: " + run.hostReads);
        }
    }

    /**
     * A learning-rate schedule: the device looks each step's rate up in a window of rates the host
     * evaluated ahead ({@code LearningRateWindow}, 256 updates). When the window moves, between
     * steps, the new rates are a new array and the step is captured again: 300 steps cross it, and
     * end bitwise where the eager loop's end, with no host read inside the region.
     */
    @ParameterizedTest
    @CsvSource({"mixed_float16, true", "mixed_bfloat16, false"})
    void aScheduleIsCapturedAgainWhenItsWindowMoves(String policy, boolean countReads) {
        Setup setup =
                new Setup(policy, "long-schedule", options(2), 300, i -> BATCH, false, Draws.NONE);
        if (countReads) {
            StandInStepGraphs.ReadCounting graphs = new StandInStepGraphs.ReadCounting();
            Run run = train(setup.on(graphs));
            assertEquals(CapturedStep.State.REPLAYING, run.state, run.refusal);
            assertEquals(0, graphs.readsInside, "djl-amp's host reads inside the region");
            return;
        }
        StandInStepGraphs.Rerun graphs = new StandInStepGraphs.Rerun();
        Run captured = train(setup.on(graphs));
        assertEquals(CapturedStep.State.REPLAYING, captured.state, captured.refusal);
        // a stand-in's replay runs the step's Java again, which counts each launch twice: the
        // window moves about every 128 steps instead of 256
        assertTrue(graphs.captures >= 2, "captures: " + graphs.captures);
        assertSameStates(train(setup), captured);
        // a replay that runs no Java: the host counts each replayed launch, and the window moves
        // once in 300 launches
        StandInStepGraphs.NoReplay nothing = new StandInStepGraphs.NoReplay();
        train(setup.on(nothing));
        assertEquals(2, nothing.captures, "captured again when the window moved");
    }

    /**
     * Restoring the loss scaler's state, or loading a parameter that is not trained (BatchNorm's
     * running mean), replaces arrays the graph reads and updates in place: the next step captures
     * again instead of replaying into the old ones, and training ends where the eager loop's ends.
     */
    @ParameterizedTest
    @CsvSource({
        "mixed_float16, adam, SCALER",
        "mixed_bfloat16, sgd, SCALER",
        "mixed_bfloat16, adam, RUNNING_MEAN",
        "float32, sgd, RUNNING_MEAN"
    })
    void aGraphWhoseArraysWereReplacedIsCapturedAgain(
            String policy, String optimizer, Replaced replaced) {
        Setup setup = Setup.of(policy, optimizer).withReplaced(replaced);
        Run eager = train(setup);
        StandInStepGraphs.Rerun graphs = new StandInStepGraphs.Rerun();
        Run captured = train(setup.on(graphs));
        assertEquals(2, graphs.captures, "captured again after the restore");
        assertEquals(CapturedStep.State.REPLAYING, captured.state);
        assertSameStates(eager, captured);
    }

    @Test
    void whatCannotBeReplayedRunsEagerlyAndSaysWhy() {
        AmpOptions perParameter = AmpOptions.builder().fusedOptimizer(FusedOptimizer.OFF).build();
        assertRefused(perParameter, "sgd", "per-parameter update");
        AmpOptions accumulating =
                AmpOptions.builder().fusedOptimizer(FusedOptimizer.ON).accumulationSteps(2).build();
        assertRefused(accumulating, "sgd", "accumulate over 2 batches");
        System.setProperty(CapturedStep.PROPERTY, "off");
        try {
            assertRefused(options(2), "sgd", "-Ddjlamp.capture=off");
        } finally {
            System.clearProperty(CapturedStep.PROPERTY);
        }
    }

    /**
     * With the engine's own graphs: on a GPU, libtorch's CUDA graphs replay the step bitwise as the
     * eager steps run it (dropout's random draws included); elsewhere every step runs eagerly,
     * saying why.
     */
    @ParameterizedTest
    @CsvSource({
        "mixed_float16, sgd, false",
        "mixed_bfloat16, adam, false",
        "mixed_bfloat16, sgd, true"
    })
    void theEngineCapturesOnAGpuAndRefusesElsewhere(
            String policy, String optimizer, boolean dropout) {
        Setup setup = Setup.of(policy, optimizer);
        if (dropout) {
            setup = setup.withDropout();
        }
        Run captured = train(setup.onEngineGraphs());
        Run eager = train(setup);
        if (!gpu()) {
            assertEquals(CapturedStep.State.EAGER, captured.state);
            assertTrue(captured.refusal.contains("graphs capture CUDA work"), captured.refusal);
            System.out.println("CapturedStepTest: on " + Device.cpu() + ": " + captured.refusal);
        } else {
            assertEquals(CapturedStep.State.REPLAYING, captured.state, captured.refusal);
            assertEquals(STEPS - WARM_UP - 1, captured.replays);
            System.out.println(
                    "CapturedStepTest: "
                            + setup
                            + ": captured by libtorch's CUDA graphs, "
                            + captured.replays
                            + " replays");
        }
        assertSameStates(eager, captured);
    }

    /**
     * On a GPU, a body that reads a value on the host inside the capture: CUDA refuses the read,
     * the capture ends without a graph, the step runs again eagerly, and training goes on as the
     * eager loop's.
     */
    @Test
    void onAGpuAHostReadInTheBodyRunsTheStepEagerly() {
        if (!gpu()) {
            System.out.println(
                    "CapturedStepTest: no GPU here, so no CUDA capture to refuse a host read"
                            + " (aHostReadInTheBodyEndsCapturingNotTraining runs the plan with a"
                            + " stand-in)");
            return;
        }
        Setup setup = Setup.of("mixed_float16", "sgd").withReading();
        Run failed = train(setup.onEngineGraphs());
        assertEquals(CapturedStep.State.EAGER, failed.state);
        System.out.println("CapturedStepTest: a host read inside the capture: " + failed.refusal);
        assertSameStates(train(setup), failed);
    }

    @Test
    void closingFreesWhatTheGraphHolds() {
        Engine.getInstance().setRandomSeed(3);
        try (Model model = Model.newInstance("captured-step", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(network(false), "mixed_float16");
            model.setBlock(block);
            try (Trainer trainer =
                    model.newTrainer(Amp.configure(config("sgd"), block, options(2)))) {
                trainer.initialize(new Shape(BATCH, 3, 8, 8));
                AmpSession amp = AmpSession.of(trainer);
                CapturedStep step =
                        amp.captureStep(body(trainer), WARM_UP, new StandInStepGraphs.Rerun());
                NDList out = null;
                NDList previous = null;
                // warm-up, the capture, the checked first replay (the eager step's outputs), and
                // two replays, which return the captured outputs
                for (int i = 0; i <= WARM_UP + 3; i++) {
                    try (NDManager batch = trainer.getManager().newSubManager()) {
                        previous = out;
                        out = step.run(new NDList(data(batch, i, BATCH)), labels(batch, i, BATCH));
                    }
                }
                assertSame(previous.head(), out.head(), "a replay returns the captured outputs");
                assertTrue(!out.head().isReleased());
                step.close();
                assertTrue(out.head().isReleased(), "the outputs go with the graph");
                IllegalStateException e =
                        assertThrows(IllegalStateException.class, () -> step.run(null, null));
                assertNotNull(e.getMessage());
                assertThrows(
                        IllegalArgumentException.class, () -> amp.captureStep(body(trainer), 0));
            }
        }
    }

    private static void assertRefused(AmpOptions options, String optimizer, String reason) {
        Setup setup =
                new Setup("mixed_float16", optimizer, options, 2, i -> BATCH, false, Draws.NONE);
        Run run = train(setup.on(new StandInStepGraphs.Rerun()));
        assertEquals(CapturedStep.State.EAGER, run.state);
        assertNotNull(run.refusal);
        assertTrue(run.refusal.contains(reason), run.refusal);
        assertEquals(0, run.replays);
    }

    private static boolean gpu() {
        return Engine.getEngine("PyTorch").getGpuCount() > 0;
    }

    private static void assertSameStates(Run eager, Run captured) {
        assertEquals(eager.growthTracker, captured.growthTracker, "the scaler's growth tracker");
        assertEquals(eager.skipped, captured.skipped, "the scaler's skipped steps");
        assertEquals(eager.states.size(), captured.states.size());
        for (int step = 0; step < eager.states.size(); step++) {
            List<float[]> expected = eager.states.get(step);
            List<float[]> actual = captured.states.get(step);
            assertEquals(expected.size(), actual.size());
            for (int i = 0; i < expected.size(); i++) {
                assertArrayEquals(expected.get(i), actual.get(i), 0f, "step " + step + ", " + i);
            }
        }
    }

    private static AmpOptions options(int hostSyncInterval) {
        return AmpOptions.builder()
                .fusedOptimizer(FusedOptimizer.ON)
                .hostSyncInterval(hostSyncInterval)
                .build();
    }

    private static DefaultTrainingConfig config(String optimizer) {
        Optimizer update =
                switch (optimizer) {
                    case "adam" ->
                            Optimizer.adam().optLearningRateTracker(Tracker.fixed(0.01f)).build();
                    case "long-schedule" ->
                            Optimizer.sgd()
                                    .setLearningRateTracker(
                                            Tracker.factor()
                                                    .setBaseValue(0.05f)
                                                    .setFactor(0.995f)
                                                    .build())
                                    .optMomentum(0.9f)
                                    .build();
                    default ->
                            Optimizer.sgd()
                                    .setLearningRateTracker(Tracker.fixed(0.1f))
                                    .optMomentum(0.9f)
                                    .build();
                };
        return new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss()).optOptimizer(update);
    }

    /** Where a test network draws random numbers in training. */
    private enum Draws {
        NONE,
        /** DJL's Dropout block, drawing from the device's default generator. */
        DROPOUT,
        /** Dropout between the layers of an LSTM, drawn inside the engine's recurrent kernel. */
        RECURRENT_DROPOUT
    }

    private static Block network(Draws draws) {
        if (draws != Draws.RECURRENT_DROPOUT) {
            return network(draws == Draws.DROPOUT);
        }
        // each image's rows as a sequence of 8 steps of 24 values
        return new SequentialBlock()
                .add(Blocks.batchFlattenBlock())
                .add(x -> new NDList(x.head().reshape(x.head().getShape().get(0), 8, 24)))
                .add(
                        LSTM.builder()
                                .setStateSize(6)
                                .setNumLayers(2)
                                .optDropRate(0.5f)
                                .optBatchFirst(true)
                                .build())
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(5).build());
    }

    /** A small convolutional network: conv, BatchNorm, relu (dropout), pooling, linear. */
    static Block network(boolean dropout) {
        SequentialBlock network =
                new SequentialBlock()
                        .add(
                                Conv2d.builder()
                                        .setKernelShape(new Shape(3, 3))
                                        .optPadding(new Shape(1, 1))
                                        .setFilters(4)
                                        .build())
                        .add(BatchNorm.builder().build())
                        .add(Activation.reluBlock());
        if (dropout) {
            network.add(Dropout.builder().optRate(0.3f).build());
        }
        return network.add(Pool.globalAvgPool2dBlock())
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(5).build());
    }

    private static StepBody body(Trainer trainer) {
        return (data, labels) -> {
            try (GradientCollector collector = trainer.newGradientCollector()) {
                NDArray loss = trainer.getLoss().evaluate(labels, trainer.forward(data));
                collector.backward(loss);
                return new NDList(loss);
            }
        };
    }

    /**
     * A body that unscales the gradients and reads a gradient's norm on the host, as a loop that
     * clips by norm does: no capture can hold it.
     */
    private static StepBody readingBody(Trainer trainer, AmpSession amp) {
        return (data, labels) -> {
            NDArray loss;
            try (GradientCollector collector = trainer.newGradientCollector()) {
                loss = trainer.getLoss().evaluate(labels, trainer.forward(data));
                collector.backward(loss);
            }
            amp.unscaleGradients();
            if (CAPTURING.get()) {
                throw new EngineException(
                        "CUDA error: operation not permitted when stream is capturing");
            }
            Parameter first = trainer.getModel().getBlock().getParameters().get(0).getValue();
            assertTrue(first.getArray().getGradient().norm().getFloat() >= 0f);
            return new NDList(loss);
        };
    }

    private static NDArray data(NDManager manager, int step, int size) {
        if (CHANNELS_LAST.get()) {
            // DJL's ToTensor transposes each HWC image: a batch of them is channels-last in memory
            return manager.arange(size * 3f * 8 * 8)
                    .reshape(size, 8, 8, 3)
                    .div(37f + step)
                    .sin()
                    .transpose(0, 3, 1, 2);
        }
        return manager.arange(size * 3f * 8 * 8).reshape(size, 3, 8, 8).div(37f + step).sin();
    }

    private static NDList labels(NDManager manager, int step, int size) {
        return new NDList(manager.arange(size).add(step).mod(5));
    }

    /** Arrays of the same values put in place of those a graph holds, after a replayed step. */
    private enum Replaced {
        NOTHING,
        /** The loss scaler's state restored, as loading a checkpoint does. */
        SCALER,
        /** BatchNorm's running mean loaded, as loading only a model's statistics does. */
        RUNNING_MEAN;

        void replace(AmpSession amp, Block block) {
            if (this == SCALER) {
                amp.getScaler().restore(amp.getScaler().state());
            } else if (this == RUNNING_MEAN) {
                Parameter mean =
                        block.getParameters().stream()
                                .map(Pair::getValue)
                                .filter(p -> p.getName().equals("runningMean"))
                                .findFirst()
                                .orElseThrow();
                ByteArrayOutputStream saved = new ByteArrayOutputStream();
                try {
                    mean.save(new DataOutputStream(saved));
                    NDManager owner = mean.getArray().getManager();
                    NDArray old = mean.getArray();
                    mean.load(
                            owner,
                            new DataInputStream(new ByteArrayInputStream(saved.toByteArray())));
                    assertTrue(old != mean.getArray(), "loading made a new array");
                } catch (IOException | MalformedModelException e) {
                    throw new AssertionError(e);
                }
            }
        }
    }

    /** What a run ended with: after each step the loss read, the weights and statistics. */
    private record Run(
            List<List<float[]>> states,
            CapturedStep.State state,
            String refusal,
            long replays,
            long scalerSteps,
            long hostReads,
            int growthTracker,
            long skipped) {}

    /**
     * A run's training: a {@code reading} body reads a gradient's norm on the host before the step.
     * Without graphs, the plain custom loop of {@code AmpSession}'s documentation; else the same
     * body through a captured step on them (the engine's own when {@code engine}).
     */
    private record Setup(
            String policy,
            String optimizer,
            AmpOptions options,
            int steps,
            Function<Integer, Integer> sizes,
            boolean reading,
            Draws draws,
            StepGraphs graphs,
            boolean engine,
            Replaced replaced) {

        Setup(
                String policy,
                String optimizer,
                AmpOptions options,
                int steps,
                Function<Integer, Integer> sizes,
                boolean reading,
                Draws draws) {
            this(
                    policy,
                    optimizer,
                    options,
                    steps,
                    sizes,
                    reading,
                    draws,
                    null,
                    false,
                    Replaced.NOTHING);
        }

        static Setup of(String policy, String optimizer) {
            return new Setup(
                    policy,
                    optimizer,
                    CapturedStepTest.options(2),
                    STEPS,
                    i -> BATCH,
                    false,
                    Draws.NONE);
        }

        Setup withSizes(Function<Integer, Integer> batchSizes) {
            return new Setup(policy, optimizer, options, steps, batchSizes, reading, draws);
        }

        Setup withReading() {
            return new Setup(policy, optimizer, options, steps, sizes, true, draws);
        }

        Setup withRecurrentDropout() {
            return new Setup(
                    policy, optimizer, options, steps, sizes, reading, Draws.RECURRENT_DROPOUT);
        }

        Setup withDropout() {
            return new Setup(policy, optimizer, options, steps, sizes, reading, Draws.DROPOUT);
        }

        Setup on(StepGraphs stepGraphs) {
            return new Setup(
                    policy,
                    optimizer,
                    options,
                    steps,
                    sizes,
                    reading,
                    draws,
                    stepGraphs,
                    false,
                    replaced);
        }

        Setup onEngineGraphs() {
            return new Setup(
                    policy, optimizer, options, steps, sizes, reading, draws, null, true, replaced);
        }

        /** Replaces arrays the graph holds after the first replayed step: the same state. */
        Setup withReplaced(Replaced what) {
            return new Setup(
                    policy, optimizer, options, steps, sizes, reading, draws, graphs, engine, what);
        }

        boolean captures() {
            return graphs != null || engine;
        }

        @Override
        public String toString() {
            return policy + " " + optimizer + (draws == Draws.NONE ? "" : " with " + draws);
        }
    }

    private static Run train(Setup setup) {
        Engine.getInstance().setRandomSeed(11);
        List<List<float[]>> states = new ArrayList<>();
        try (Model model = Model.newInstance("captured-step", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(network(setup.draws()), setup.policy());
            model.setBlock(block);
            try (Trainer trainer =
                    model.newTrainer(
                            Amp.configure(config(setup.optimizer()), block, setup.options()))) {
                trainer.initialize(new Shape(BATCH, 3, 8, 8));
                AmpSession amp = AmpSession.of(trainer);
                StepBody body = setup.reading() ? readingBody(trainer, amp) : body(trainer);
                PARAMETERS.set(block);
                CapturedStep step =
                        setup.captures() ? amp.captureStep(body, WARM_UP, setup.graphs()) : null;
                try {
                    for (int i = 0; i < setup.steps(); i++) {
                        try (NDManager batch = trainer.getManager().newSubManager()) {
                            int size = setup.sizes().apply(i);
                            NDList data = new NDList(data(batch, i, size));
                            NDList labels = labels(batch, i, size);
                            NDList out;
                            if (step == null) {
                                out = body.run(data, labels);
                                amp.step();
                            } else {
                                out = step.run(data, labels);
                            }
                            List<float[]> state = new ArrayList<>();
                            state.add(out.head().toFloatArray());
                            if (i == WARM_UP + 1) {
                                setup.replaced().replace(amp, block);
                            }
                            for (Pair<String, Parameter> p : block.getParameters()) {
                                state.add(p.getValue().getArray().toFloatArray());
                            }
                            states.add(state);
                        }
                    }
                    return new Run(
                            states,
                            step == null ? null : step.getState(),
                            step == null ? null : step.getRefusal(),
                            step == null ? 0 : step.getReplays(),
                            amp.getScaler().getSteps(),
                            amp.getScaler().getHostReads(),
                            amp.getScaler().getGrowthTracker(),
                            amp.getScaler().getSkippedSteps());
                } finally {
                    if (step != null) {
                        step.close();
                    }
                }
            }
        }
    }

    /**
     * The runtime refuses the body's host read while capturing, as CUDA does; what the region did
     * before it (weights, statistics, gradients) is undone, since a capture runs nothing on the
     * device.
     */
    private static final class ReadRefusingGraphs extends StandInStepGraphs {
        @Override
        public StepGraph capture(Device device, Runnable region) {
            List<NDArray> live = new ArrayList<>();
            for (Pair<String, Parameter> p : PARAMETERS.get().getParameters()) {
                NDArray array = p.getValue().getArray();
                live.add(array);
                if (array.hasGradient()) {
                    live.add(array.getGradient());
                }
            }
            List<NDArray> before = new ArrayList<>();
            for (NDArray array : live) {
                before.add(array.duplicate());
            }
            CAPTURING.set(true);
            try {
                region.run();
                return null;
            } finally {
                CAPTURING.set(false);
                for (int i = 0; i < live.size(); i++) {
                    live.get(i).set(before.get(i).toByteBuffer());
                    before.get(i).close();
                }
            }
        }
    }
}
