package io.github.djlamp.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.doctor.AmpDoctor;
import io.github.djlamp.amp.doctor.DoctorReport;
import io.github.djlamp.amp.doctor.PlatformReport;
import io.github.djlamp.amp.doctor.RunResult;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.scale.LossScaling;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/** The AMP doctor on a tiny model: sane numbers, same start for every run, real skipped steps. */
class AmpDoctorTest {

    private static final int EPOCHS = 2;
    private static final int STEPS = EPOCHS * TinyDoctor.SAMPLES / TinyDoctor.BATCH;

    @Test
    void everyRunReportsSaneNumbers() throws Exception {
        try (NDManager manager = NDManager.newBaseManager()) {
            DoctorReport report =
                    TinyDoctor.builder(manager, EPOCHS, "float32", "mixed_bfloat16").build().run();
            List<RunResult> runs = report.getRuns();
            assertEquals(2, runs.size());
            RunResult fp32 = runs.get(0);
            RunResult bf16 = runs.get(1);
            assertFalse(fp32.isMixedPrecision(), "the baseline runs through plain DJL");
            assertEquals(Precision.FP32, fp32.getPrecision());
            assertTrue(bf16.isMixedPrecision());
            assertEquals(Precision.BF16, bf16.getPrecision());
            assertEquals(fp32, report.getBaseline());
            assertTrue(report.speedup() > 0, "speedup " + report.speedup());
            // the platform check ran first, in a child JVM; this machine computes right
            PlatformReport platform = report.getPlatformReport();
            assertNotNull(platform, "the doctor runs the platform check by default");
            if (!platform.isSound()) {
                System.out.println("PLATFORM DEFECT found by the doctor's check:\n" + platform);
            }
            assertTrue(report.toTable().contains(platform.summary()), report.toTable());
            // the bf16 run's layers were checked against fp32 at their first use
            assertEquals("-", fp32.describeKernelChecks());
            assertTrue(
                    bf16.getKernelVerdicts().size() >= 2,
                    "the MLP's two linear layers, at each batch shape: "
                            + bf16.getKernelVerdicts());
            assertTrue(
                    bf16.describeKernelChecks().matches("\\d+ checked, .+"),
                    bf16.describeKernelChecks());
            assertTrue(report.toTable().contains("16-bit kernel checks"), report.toTable());
            for (RunResult run : runs) {
                String name = run.getLabel();
                assertEquals(STEPS, run.getSteps(), name);
                assertEquals(STEPS, run.getLosses().size(), name);
                assertEquals(STEPS, run.getLossScales().size(), name);
                assertEquals(STEPS, run.getStepMillis().size(), name);
                assertEquals((long) EPOCHS * TinyDoctor.SAMPLES, run.getImagesTrained(), name);
                assertEquals(1, run.getWarmupSteps(), name);
                assertTrue(run.getImagesPerSecond() > 0, name);
                assertTrue(run.getTrainSeconds() > 0, name);
                double accuracy = run.getTestAccuracy();
                assertTrue(accuracy >= 0 && accuracy <= 1, name + " accuracy " + accuracy);
                for (float loss : run.getLosses()) {
                    assertTrue(Float.isFinite(loss) && loss >= 0, name + " loss " + loss);
                }
                assertEquals("none", run.getLossScaling(), name);
                assertEquals(0, run.getSkippedCount(), name);
                assertTrue(run.getLossScales().stream().allMatch(s -> s == 1f), name);
                assertTrue(run.getPeakMemoryBytes() > 0, name + " peak memory");
                assertTrue(run.getStepMemoryBytes() >= 0, name + " step memory");
                // the model learns: the last epoch's losses are below the first step's
                float first = run.getLosses().get(0);
                float lastEpochMean =
                        (float)
                                run.getLosses().subList(STEPS / 2, STEPS).stream()
                                        .mapToDouble(Float::doubleValue)
                                        .average()
                                        .orElseThrow();
                assertTrue(lastEpochMean < first, name + ": " + first + " -> " + lastEpochMean);
            }
            // same seed: same initial weights and the same first batch, so the first losses
            // differ only by bf16 rounding
            float a = fp32.getLosses().get(0);
            float b = bf16.getLosses().get(0);
            assertEquals(a, b, 0.03 * a, "first-step losses fp32 " + a + " vs bf16 " + b);
        }
    }

    @Test
    void checkpointingAddsARunPerPolicyThatTrainsExactlyLikeTheRunWithout() throws Exception {
        try (NDManager manager = NDManager.newBaseManager()) {
            DoctorReport report =
                    TinyDoctor.builder(manager, 1, "float32", "mixed_bfloat16")
                            .optCheckpointing(Checkpointing.stages())
                            .build()
                            .run();
            List<RunResult> runs = report.getRuns();
            assertEquals(3, runs.size(), "fp32 (plain DJL: not checkpointed), bf16, bf16 ckpt");
            assertEquals(null, runs.get(1).getCheckpointing());
            assertEquals("stages", runs.get(2).getCheckpointing());
            assertTrue(runs.get(2).getLabel().contains("ckpt stages"), runs.get(2).getLabel());
            // the same gradients (bitwise on the CPU), so the same losses step by step
            assertEquals(runs.get(1).getLosses(), runs.get(2).getLosses());
        }
    }

    @Test
    void theSameSeedGivesTheSameRun() throws Exception {
        try (NDManager manager = NDManager.newBaseManager()) {
            AmpDoctor doctor = TinyDoctor.builder(manager, 1, "float32").optSeed(7).build();
            List<Float> first = doctor.run().getRuns().get(0).getLosses();
            List<Float> second = doctor.run().getRuns().get(0).getLosses();
            assertEquals(first.size(), second.size());
            for (int i = 0; i < first.size(); i++) {
                assertEquals(first.get(i), second.get(i), 1e-5, "step " + i);
            }
        }
    }

    @Test
    void fp16OverflowsAreSkippedAndTheScaleBacksOff() throws Exception {
        float init = 1 << 24; // far too large: scaled fp16 gradients overflow until it backs off
        try (NDManager manager = NDManager.newBaseManager()) {
            DoctorReport report =
                    TinyDoctor.builder(manager, EPOCHS, "mixed_float16")
                            .optLossScaling(
                                    LossScaling.dynamicBuilder()
                                            .initScale(init)
                                            .growthInterval(4)
                                            .build())
                            .build()
                            .run();
            RunResult fp16 = report.getRuns().get(0);
            assertEquals(Precision.FP16, fp16.getPrecision());
            assertTrue(fp16.isLossScaled(), fp16.getLossScaling());
            assertTrue(fp16.getSkippedCount() > 0, "an initial scale of 2^24 overflows fp16");
            List<Float> scales = fp16.getLossScales();
            Set<Integer> backoffs = new TreeSet<>();
            float previous = init;
            for (int i = 0; i < scales.size(); i++) {
                if (scales.get(i) < previous) {
                    assertEquals(
                            previous * 0.5f, scales.get(i), "step " + i + " backs off by half");
                    backoffs.add(i);
                }
                previous = scales.get(i);
            }
            assertEquals(backoffs, new TreeSet<>(fp16.getSkippedSteps()), "skipped = backed off");
            assertTrue(fp16.getMinLossScale() < init);
            for (float loss : fp16.getLosses()) {
                assertTrue(Float.isFinite(loss), "the unscaled loss is finite: " + loss);
            }
        }
    }

    @Test
    void suppliersThatRepeatAnObjectAreRefusedWithTheContract() throws Exception {
        try (NDManager manager = NDManager.newBaseManager()) {
            ai.djl.training.TrainingConfig shared = TinyDoctor.config();
            IllegalArgumentException sameConfig =
                    assertThrows(
                            IllegalArgumentException.class,
                            () ->
                                    TinyDoctor.builder(manager, 1, "float32", "mixed_bfloat16")
                                            .setTrainingConfig(() -> shared)
                                            .build()
                                            .run());
            assertTrue(
                    sameConfig
                            .getMessage()
                            .contains("returned the same configuration for a" + " second run"),
                    sameConfig.getMessage());
            ai.djl.nn.Block block = TinyDoctor.mlp();
            IllegalArgumentException sameBlock =
                    assertThrows(
                            IllegalArgumentException.class,
                            () ->
                                    TinyDoctor.builder(manager, 1, "float32", "mixed_bfloat16")
                                            .setModelFactory(() -> block)
                                            .build()
                                            .run());
            assertTrue(
                    sameBlock.getMessage().contains("returned the same block for a second run"),
                    sameBlock.getMessage());
        }
    }

    @Test
    void theBuilderSaysWhatIsMissingOrWrong() throws Exception {
        try (NDManager manager = NDManager.newBaseManager()) {
            IllegalArgumentException noModel =
                    assertThrows(
                            IllegalArgumentException.class,
                            () ->
                                    AmpDoctor.builder()
                                            .setTrainingConfig(TinyDoctor::config)
                                            .build());
            assertTrue(noModel.getMessage().contains("setModelFactory"), noModel.getMessage());
            IllegalArgumentException twice =
                    assertThrows(
                            IllegalArgumentException.class,
                            () -> TinyDoctor.builder(manager, 1, "fp32", "float32").build());
            assertTrue(twice.getMessage().contains("twice"), twice.getMessage());
            IllegalArgumentException epochs =
                    assertThrows(
                            IllegalArgumentException.class,
                            () -> TinyDoctor.builder(manager, 0, "fp32").build());
            assertTrue(epochs.getMessage().contains("optEpochs(0)"), epochs.getMessage());
            IllegalArgumentException policy =
                    assertThrows(
                            IllegalArgumentException.class,
                            () -> TinyDoctor.builder(manager, 1, "fp8"));
            assertTrue(policy.getMessage().contains("fp8"), policy.getMessage());
        }
    }

    @Test
    void eachRunStartsFromReleasedMemoryAndMeasuresItsStepsAfterReleasingAgain() throws Exception {
        List<String> events = new java.util.ArrayList<>();
        try (NDManager manager = NDManager.newBaseManager()) {
            TinyDoctor.builder(manager, 1, "float32", "mixed_bfloat16")
                    .optMemoryProbe(device -> new RecordingProbe(events))
                    .build()
                    .run();
        }
        String trace = String.join(" ", events);
        int steps = TinyDoctor.SAMPLES / TinyDoctor.BATCH;
        String run =
                "new release"
                        + " start end".repeat(steps)
                        + " start" // the loop reads the clock before it learns there is no batch
                        + " release start end".repeat(AmpDoctor.MEMORY_STEPS);
        assertEquals(run + " " + run, trace);
    }

    /**
     * A probe that records the doctor's calls, as a CUDA probe would empty its cache on release.
     */
    private static final class RecordingProbe implements io.github.djlamp.amp.doctor.MemoryProbe {
        private final List<String> events;

        RecordingProbe(List<String> events) {
            this.events = events;
            events.add("new");
        }

        @Override
        public void release() {
            events.add("release");
        }

        @Override
        public void stepStarted() {
            events.add("start");
        }

        @Override
        public void stepEnded() {
            events.add("end");
        }

        @Override
        public long getPeakBytes() {
            return -1;
        }

        @Override
        public long getLastStepGrowthBytes() {
            return -1;
        }

        @Override
        public String describe() {
            return "recorded";
        }
    }
}
