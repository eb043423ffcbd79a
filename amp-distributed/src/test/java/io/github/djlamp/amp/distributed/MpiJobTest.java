package io.github.djlamp.amp.distributed;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.djlamp.amp.FusedOptimizer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Data-parallel training across real processes: {@code mpirun} on loopback, each rank a JVM
 * training {@link TrainingJob}, compared with one process training on the whole global batch.
 */
class MpiJobTest {

    private static final int STEPS = 6;
    private static final String PRECISIONS = "fp32,bf16,fp16";

    @TempDir Path out;

    @Test
    void twoRanksEqualOneProcessOnTheGlobalBatch() throws Exception {
        ranksEqualOneProcess(2, 16, false);
    }

    /**
     * The gradients take the host staging CUDA gradients take: copied out, reduced, copied back.
     */
    @Test
    void fourRanksThroughHostStagingEqualOneProcessOnTheGlobalBatch() throws Exception {
        ranksEqualOneProcess(4, 16, true);
    }

    /**
     * Checkpointed segments are recomputed before the gradients are reduced: two ranks with every
     * stage checkpointed end bitwise where two ranks without end, in fp32, bf16 and fp16.
     */
    @Test
    void twoRanksWithCheckpointingEndBitwiseWhereTwoRanksWithoutEnd() throws Exception {
        Path plain = Files.createDirectories(out.resolve("plain"));
        Path checkpointed = Files.createDirectories(out.resolve("checkpointed"));
        for (Path dir : List.of(plain, checkpointed)) {
            List<String> args =
                    new ArrayList<>(
                            List.of(dir.toString(), Integer.toString(STEPS), "16", PRECISIONS));
            if (dir == checkpointed) {
                args.add("checkpointing=stages");
            }
            MpiLauncher.Outcome run =
                    MpiLauncher.run(2, 240, List.of(), args.toArray(new String[0]));
            assertEquals(0, run.exitCode, run.output);
        }
        for (String precision : PRECISIONS.split(",")) {
            for (int rank = 0; rank < 2; rank++) {
                TrainingJob.Result without = read(plain, precision, rank);
                TrainingJob.Result with = read(checkpointed, precision, rank);
                // 3 stages, recomputed at every step of every rank; none without checkpointing
                assertEquals(
                        "0",
                        Files.readString(plain.resolve(precision + "-rank-" + rank + ".segments")));
                assertEquals(
                        Long.toString(3L * STEPS),
                        Files.readString(
                                checkpointed.resolve(precision + "-rank-" + rank + ".segments")),
                        precision + " rank " + rank + ": segments recomputed");
                assertEquals(STEPS, with.steps, precision);
                assertEquals(without.scale, with.scale, precision);
                assertEquals(without.skipped, with.skipped, precision);
                for (int i = 0; i < without.weights.size(); i++) {
                    assertArrayEquals(
                            without.weights.get(i),
                            with.weights.get(i),
                            precision + " rank " + rank + " parameter " + i);
                }
            }
        }
    }

    private void ranksEqualOneProcess(int ranks, int globalBatch, boolean staged) throws Exception {
        List<String> args =
                new ArrayList<>(
                        List.of(
                                out.toString(),
                                Integer.toString(STEPS),
                                Integer.toString(globalBatch),
                                PRECISIONS));
        if (staged) {
            args.add("staging=host");
        }
        MpiLauncher.Outcome run =
                MpiLauncher.run(ranks, 240, List.of(), args.toArray(new String[0]));
        assertEquals(0, run.exitCode, run.output);
        for (String precision : PRECISIONS.split(",")) {
            TrainingJob.Result reference =
                    TrainingJob.train(World.local(), precision, STEPS, globalBatch, null);
            TrainingJob.Result root = read(precision, 0);
            assertEquals(STEPS, root.steps, precision);
            for (int rank = 0; rank < ranks; rank++) {
                // the MLP's 276 gradients in 1024-byte buckets: 832 bytes, then 272, every step
                assertEquals(
                        staged ? 2 * STEPS : 0,
                        read(precision, rank).stagedBuckets,
                        "buckets staged through the host");
            }
            for (int rank = 1; rank < ranks; rank++) {
                TrainingJob.Result other = read(precision, rank);
                // every rank steps with the same reduced gradients: bitwise the same weights
                for (int i = 0; i < root.weights.size(); i++) {
                    assertArrayEquals(
                            root.weights.get(i), other.weights.get(i), precision + " rank " + rank);
                }
                assertEquals(root.scale, other.scale, precision);
                // the epoch's loss and accuracy are the ranks' mean: the same on every rank
                assertEquals(root.epochLoss, other.epochLoss, precision);
                assertEquals(root.epochAccuracy, other.epochAccuracy, precision);
                assertEquals(root.skipped, other.skipped, precision);
            }
            assertEquals(reference.scale, root.scale, precision + " loss scale");
            assertEquals(reference.skipped, root.skipped, precision + " skipped steps");
            float tolerance = precision.equals("fp32") ? 1e-5f : 2e-3f;
            for (int i = 0; i < root.weights.size(); i++) {
                assertArrayEquals(
                        reference.weights.get(i),
                        root.weights.get(i),
                        tolerance,
                        precision + " parameter " + i + " vs one process");
            }
            // and what one process reports for the global batches
            assertEquals(reference.epochLoss, root.epochLoss, 1e-3f, precision + " epoch loss");
            assertEquals(
                    reference.epochAccuracy, root.epochAccuracy, 1e-6f, precision + " accuracy");
            if (precision.equals("fp16")) {
                // the schedule made the scale move: growth every 3 clean steps
                assertNotEquals(1024f, root.scale);
            }
        }
    }

    @Test
    void parametersAndBatchNormStatisticsStartFromRankZero() throws Exception {
        MpiLauncher.Outcome run =
                MpiLauncher.run(2, 120, List.of(), out.toString(), "0", "2", "bn-start");
        assertEquals(0, run.exitCode, run.output);
        TrainingJob.Result root = read("bn-start", 0);
        TrainingJob.Result other = read("bn-start", 1);
        TrainingJob.Result reference = TrainingJob.batchNormStart(World.local());
        // linear weight and bias, gamma, beta, running mean and variance
        assertEquals(6, root.weights.size());
        for (int i = 0; i < root.weights.size(); i++) {
            assertArrayEquals(root.weights.get(i), other.weights.get(i), "parameter " + i);
            assertArrayEquals(reference.weights.get(i), other.weights.get(i), "parameter " + i);
        }
        // rank 1 initialized its running mean to 2 and its variance to 3: rank 0's 1 and 2 won
        assertEquals(1f, other.weights.get(4)[0]);
        assertEquals(2f, other.weights.get(5)[0]);
    }

    @Test
    void anInfOnOneRankSkipsTheStepOnAll() throws Exception {
        infOnOneRankSkipsTheStepOnAll(List.of("-Dorg.slf4j.simpleLogger.defaultLogLevel=info"));
    }

    /**
     * The fused step keeps the scaler state on the device: every rank still skips and backs off.
     */
    @Test
    void anInfOnOneRankSkipsTheFusedStepOnAll() throws Exception {
        infOnOneRankSkipsTheStepOnAll(
                List.of(
                        "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                        "-D" + FusedOptimizer.PROPERTY + "=true"));
    }

    private void infOnOneRankSkipsTheStepOnAll(List<String> jvmArgs) throws Exception {
        MpiLauncher.Outcome run =
                MpiLauncher.run(2, 120, jvmArgs, out.toString(), "4", "8", "fp16", "fault=1:2:inf");
        assertEquals(0, run.exitCode, run.output);
        // djl-amp's epoch summary once, from rank 0
        assertEquals(
                1,
                run.output.split("djl-amp epoch 1: 4 steps, 1 skipped", -1).length - 1,
                run.output);
        TrainingJob.Result root = read("fp16", 0);
        TrainingJob.Result other = read("fp16", 1);
        assertEquals(1, root.skipped, "rank 0 skipped the step whose Inf was on rank 1");
        assertEquals(1, other.skipped);
        assertEquals(root.scale, other.scale);
        assertEquals(512f, root.scale, "1024 backed off once at step 2, not grown back by step 4");
        for (int i = 0; i < root.weights.size(); i++) {
            assertArrayEquals(root.weights.get(i), other.weights.get(i));
        }
    }

    @Test
    void aKilledRankEndsTheJobNamingIt() throws Exception {
        MpiLauncher.Outcome run =
                MpiLauncher.run(
                        2, 120, List.of(), out.toString(), "50", "8", "fp32", "fault=1:2:kill");
        assertNotEquals(0, run.exitCode, run.output);
        assertTrue(run.output.contains("rank 1"), run.output);
        assertTrue(run.seconds < 100, "took " + run.seconds + " s");
        assertTrue(Files.notExists(out.resolve("fp32-rank-0.txt")));
    }

    /**
     * An exception ends one rank's program while the others wait for it in a collective: its
     * World's close says so instead of finalizing (which would wait forever), the exception is
     * printed, and the job ends at once, not at the deadline.
     */
    @ParameterizedTest
    @ValueSource(ints = {0, 1})
    void anExceptionOnOneRankEndsTheJobWithItsMessage(int failing) throws Exception {
        MpiLauncher.Outcome run =
                MpiLauncher.run(
                        2,
                        120,
                        List.of("-D" + World.TIMEOUT_PROPERTY + "=60"),
                        out.toString(),
                        "50",
                        "8",
                        "fp32",
                        "fault=" + failing + ":2:throw");
        assertNotEquals(0, run.exitCode, run.output);
        assertTrue(run.output.contains("TrainingJob: a bug on this rank"), run.output);
        assertTrue(
                run.output.contains(
                        "djl-amp: rank " + failing + " of 2 left the job after collective #"),
                run.output);
        assertFalse(
                run.output.contains("waited 60 s"), "not ended by the deadline:\n" + run.output);
    }

    /**
     * Ranks that do not train the same thing are named when the trainer is created (or, for a
     * layer's width, when its parameters are initialized), on every rank, in seconds: not a raw MPI
     * error, a hang until the deadline or a NaN loss later.
     */
    @ParameterizedTest
    @ValueSource(strings = {"width", "layer", "policy", "data"})
    void ranksThatDoNotMatchAreNamedAtTheStart(String difference) throws Exception {
        MpiLauncher.Outcome run =
                MpiLauncher.run(
                        2,
                        120,
                        List.of("-D" + World.TIMEOUT_PROPERTY + "=60"),
                        out.toString(),
                        "4",
                        "8",
                        "fp16",
                        "fault=1:0:" + difference);
        assertNotEquals(0, run.exitCode, run.output);
        String expected =
                difference.equals("width")
                        ? "The ranks' parameter '01Linear_weight' differs in size"
                        : difference.equals("data")
                                ? "The ranks' datasets differ in size"
                                : "The ranks do not train the same setup: rank 1 differs from"
                                        + " rank 0";
        assertTrue(run.output.contains(expected), run.output);
        assertFalse(
                run.output.contains("waited 60 s"), "not ended by the deadline:\n" + run.output);
    }

    /** A rank that hangs after the last collective: the job ends after the deadline, naming it. */
    @ParameterizedTest
    @ValueSource(ints = {0, 1})
    void aRankHungAtTheEndIsNamedAndTheJobAborted(int hung) throws Exception {
        MpiLauncher.Outcome run =
                MpiLauncher.run(
                        2,
                        60,
                        List.of("-D" + World.TIMEOUT_PROPERTY + "=3"),
                        out.toString(),
                        "2",
                        "8",
                        "fp32",
                        "fault=" + hung + ":0:hang-at-end");
        assertNotEquals(0, run.exitCode, run.output);
        assertTrue(
                run.output.contains(
                        hung == 1
                                ? "for the other ranks to close theirs: rank 1 did not"
                                : "rank 0 is lost or hangs after the last collective"),
                run.output);
        assertTrue(run.seconds < 100, "took " + run.seconds + " s");
    }

    @Test
    void aHungRankIsNamedAndTheJobAbortedWithinTheDeadline() throws Exception {
        MpiLauncher.Outcome run =
                MpiLauncher.run(
                        2,
                        120,
                        List.of("-D" + World.TIMEOUT_PROPERTY + "=5"),
                        out.toString(),
                        "50",
                        "8",
                        "fp32",
                        "fault=1:2:hang");
        assertNotEquals(0, run.exitCode, run.output);
        assertTrue(
                run.output.contains("rank 1 never arrived: lost or hung"),
                "rank 0 names the hung rank:\n" + run.output);
        assertTrue(run.seconds < 100, "took " + run.seconds + " s");
    }

    /**
     * The deadline set in {@code DataParallelOptions} replaces the world's 300 s default; rank 0's
     * message says where it came from.
     */
    @Test
    void aDeadlineFromTheOptionsEndsAHungJobAndIsNamed() throws Exception {
        MpiLauncher.Outcome run =
                MpiLauncher.run(
                        2,
                        120,
                        List.of(),
                        out.toString(),
                        "50",
                        "8",
                        "fp32",
                        "fault=1:2:hang",
                        "deadline=5");
        assertNotEquals(0, run.exitCode, run.output);
        assertTrue(run.output.contains("rank 1 never arrived: lost or hung"), run.output);
        assertTrue(run.output.contains("DataParallelOptions.collectiveTimeout"), run.output);
        assertTrue(run.seconds < 100, "took " + run.seconds + " s");
    }

    /** A process joins the job once: a second {@code World.init()} says to pass the first world. */
    @Test
    void aSecondInitIsRefusedNamingTheFix() throws Exception {
        MpiLauncher.Outcome run = MpiLauncher.run(SecondInitJob.class, 2, 60, List.of());
        assertEquals(0, run.exitCode, run.output);
        for (int rank = 0; rank < 2; rank++) {
            assertTrue(
                    run.output.contains(
                            "rank "
                                    + rank
                                    + " refused: MPI is already initialized in this"
                                    + " process"),
                    run.output);
        }
        assertTrue(run.output.contains("pass the World the first call returned"), run.output);
    }

    /** Fused steps too: the scaler state lives on the device and is read at the epoch's end. */
    @ParameterizedTest(name = "fused optimizer {0}")
    @ValueSource(booleans = {false, true})
    void aRankKilledWhileSavingLeavesThePreviousCheckpointAndAResumeRestoresItOnEveryRank(
            boolean fused) throws Exception {
        List<String> jvm = fused ? List.of("-D" + FusedOptimizer.PROPERTY + "=true") : List.of();
        MpiLauncher.Outcome straight =
                MpiLauncher.run(
                        CheckpointJob.class,
                        2,
                        120,
                        jvm,
                        out.toString(),
                        out.resolve("uninterrupted").toString(),
                        "straight");
        assertEquals(0, straight.exitCode, straight.output);

        Path checkpoints = out.resolve("checkpoints");
        MpiLauncher.Outcome save =
                MpiLauncher.run(
                        CheckpointJob.class,
                        2,
                        120,
                        jvm,
                        out.toString(),
                        checkpoints.toString(),
                        "save");
        assertNotEquals(0, save.exitCode, save.output);
        assertTrue(
                save.output.contains("CheckpointJob: rank 0 dies while writing checkpoint 2"),
                save.output);
        // killed with half of checkpoint 2 written: in the temporary directory, not in place
        List<Path> entries = list(checkpoints);
        assertEquals(3, entries.size(), entries.toString());
        assertEquals(checkpoints.resolve("ckpt-0001.optimizer"), entries.get(0));
        assertEquals(checkpoints.resolve("ckpt-0001.params"), entries.get(1));
        Path partial = entries.get(2);
        assertTrue(
                partial.getFileName().toString().startsWith(AtomicCheckpoint.PARTIAL_PREFIX),
                entries.toString());
        assertTrue(Files.size(partial.resolve("ckpt-0002.params")) > 0);
        assertTrue(Files.size(partial.resolve("ckpt-0002.optimizer")) > 0, "written first");
        CheckpointJob.State saved = CheckpointJob.State.ofCheckpoint(checkpoints);
        assertEquals(CheckpointJob.STEPS_PER_EPOCH, saved.scaler.getSteps());
        assertEquals(1, saved.scaler.getSkippedSteps(), "the Inf on rank 1 skipped one step");
        assertEquals(1, saved.scaler.getOverflowsSinceChange(), "hysteresis 2: no back-off yet");

        // resuming with every rank loading checkpoint 1 (a copy: the other resume writes beside it)
        Path copy = Files.createDirectories(out.resolve("checkpoints-every-rank"));
        for (String file : List.of("ckpt-0001.params", "ckpt-0001.optimizer")) {
            Files.copy(checkpoints.resolve(file), copy.resolve(file));
        }
        MpiLauncher.Outcome resumeAll =
                MpiLauncher.run(
                        CheckpointJob.class,
                        2,
                        120,
                        jvm,
                        out.toString(),
                        copy.toString(),
                        "resume-all");
        assertEquals(0, resumeAll.exitCode, resumeAll.output);

        MpiLauncher.Outcome resume =
                MpiLauncher.run(
                        CheckpointJob.class,
                        2,
                        120,
                        jvm,
                        out.toString(),
                        checkpoints.toString(),
                        "resume");
        assertEquals(0, resume.exitCode, resume.output);
        // resume: rank 0 loaded the checkpoint; rank 1 loaded nothing and held another scaler state
        for (String mode : List.of("resume", "resume-all")) {
            for (int rank = 0; rank < 2; rank++) {
                assertSameState(
                        saved,
                        CheckpointJob.State.read(
                                out.resolve(mode + "-start-rank-" + rank + ".txt")),
                        mode + ", rank " + rank + " after loading");
                // the resumed second epoch ends bitwise where the uninterrupted run's ends
                assertSameState(
                        CheckpointJob.State.read(out.resolve("straight-end-rank-" + rank + ".txt")),
                        CheckpointJob.State.read(out.resolve(mode + "-end-rank-" + rank + ".txt")),
                        mode + ", rank " + rank + " vs uninterrupted");
            }
        }
        CheckpointJob.State end = CheckpointJob.State.read(out.resolve("resume-end-rank-0.txt"));
        assertEquals(2 * CheckpointJob.STEPS_PER_EPOCH, end.scaler.getSteps());
        assertEquals(2, end.scaler.getSkippedSteps());
        // the resumed run wrote checkpoint 2 in place of the half one, and cleared the leftover
        assertEquals(
                List.of(
                        checkpoints.resolve("ckpt-0001.optimizer"),
                        checkpoints.resolve("ckpt-0001.params"),
                        checkpoints.resolve("ckpt-0002.optimizer"),
                        checkpoints.resolve("ckpt-0002.params")),
                list(checkpoints));
        assertSameState(end, CheckpointJob.State.ofCheckpoint(checkpoints), "checkpoint 2");
    }

    private static void assertSameState(
            CheckpointJob.State expected, CheckpointJob.State actual, String what) {
        assertEquals(expected.scaler.getScale(), actual.scaler.getScale(), what + ": scale");
        assertEquals(
                expected.scaler.getGrowthTracker(),
                actual.scaler.getGrowthTracker(),
                what + ": growth tracker");
        assertEquals(
                expected.scaler.getOverflowsSinceChange(),
                actual.scaler.getOverflowsSinceChange(),
                what + ": overflows since the last scale change");
        assertEquals(expected.scaler.getSteps(), actual.scaler.getSteps(), what + ": steps");
        assertEquals(
                expected.scaler.getSkippedSteps(),
                actual.scaler.getSkippedSteps(),
                what + ": skipped steps");
        assertEquals(expected.weights.size(), actual.weights.size(), what);
        for (int i = 0; i < expected.weights.size(); i++) {
            assertArrayEquals(
                    expected.weights.get(i), actual.weights.get(i), what + ": parameter " + i);
        }
    }

    private static List<Path> list(Path directory) throws Exception {
        try (Stream<Path> entries = Files.list(directory)) {
            // the checkpoint files, then the temporary directories
            return entries.sorted(
                            Comparator.comparing((Path p) -> Files.isDirectory(p))
                                    .thenComparing(Path::toString))
                    .collect(Collectors.toList());
        }
    }

    private static TrainingJob.Result read(Path dir, String precision, int rank) throws Exception {
        return TrainingJob.Result.parse(
                Files.readString(
                        dir.resolve(precision + "-rank-" + rank + ".txt"), StandardCharsets.UTF_8));
    }

    private TrainingJob.Result read(String precision, int rank) throws Exception {
        return TrainingJob.Result.parse(
                Files.readString(
                        out.resolve(precision + "-rank-" + rank + ".txt"), StandardCharsets.UTF_8));
    }
}
