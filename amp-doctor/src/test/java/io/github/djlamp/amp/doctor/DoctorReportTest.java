package io.github.djlamp.amp.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import java.util.List;
import org.junit.jupiter.api.Test;

class DoctorReportTest {

    private static RunResult run(
            String policy, Precision precision, boolean amp, double imagesPerSecond) {
        RunResult.Builder b = RunResult.builder();
        b.device = Device.cpu();
        b.policyName = policy;
        b.precision = precision;
        b.mixedPrecision = amp;
        b.epochs = 1;
        b.imagesPerSecond = imagesPerSecond;
        b.testAccuracy = 0.5;
        b.peakMemoryBytes = 512L << 20;
        b.stepMemoryBytes = 100L << 20;
        b.losses.addAll(List.of(2.3f, 1.1f, 0.7f));
        b.lossScales.addAll(List.of(1f, 1f, 1f));
        b.stepMillis.addAll(List.of(10.0, 11.0, 12.0));
        return b.build();
    }

    @Test
    void speedupIsRelativeToThePlainFp32RunWhereverItIs() {
        RunResult amp = run("auto", Precision.BF16, true, 300);
        RunResult fp32 = run("float32", Precision.FP32, false, 200);
        DoctorReport report = new DoctorReport(List.of(amp, fp32), Device.cpu(), null);
        assertSame(fp32, report.getBaseline());
        assertEquals(1.5, report.speedup(), 1e-12);
        assertEquals(1.0, report.speedup(fp32), 1e-12);
    }

    @Test
    void withoutAPlainRunTheFirstRunIsTheBaseline() {
        RunResult bf16 = run("mixed_bfloat16", Precision.BF16, true, 300);
        RunResult fp16 = run("mixed_float16", Precision.FP16, true, 30);
        DoctorReport report = new DoctorReport(List.of(bf16, fp16), Device.cpu(), null);
        assertSame(bf16, report.getBaseline());
        assertEquals(0.1, report.speedup(), 1e-12);
    }

    @Test
    void aSingleRunHasSpeedupOne() {
        DoctorReport report =
                new DoctorReport(
                        List.of(run("float32", Precision.FP32, false, 100)), Device.cpu(), null);
        assertEquals(1.0, report.speedup(), 0);
    }

    @Test
    void noRunIsRejected() {
        assertThrows(
                IllegalArgumentException.class,
                () -> new DoctorReport(List.of(), Device.cpu(), null));
    }

    @Test
    void tableShowsEveryRunSideBySideWithTheDeviceAndRecommendation() {
        DeviceCapabilities caps =
                new DeviceCapabilities(Device.cpu(), false, true, Precision.BF16, "it has bf16");
        DoctorReport report =
                new DoctorReport(
                        List.of(
                                run("float32", Precision.FP32, false, 200),
                                run("auto", Precision.BF16, true, 300)),
                        Device.cpu(),
                        caps);
        String table = report.toTable();
        String[] lines = table.split("\n");
        assertTrue(lines[0].contains("fp32, plain DJL"), table);
        assertTrue(lines[0].contains("bf16 (auto)"), table);
        assertTrue(table.contains("200.0"), table);
        assertTrue(table.contains("300.0"), table);
        assertTrue(table.contains("1.50x"), table);
        assertTrue(table.contains("50.00%"), table);
        assertTrue(table.contains("512"), table); // peak process memory, MiB
        assertTrue(table.contains("100"), table); // peak memory of a step, MiB
        assertTrue(table.contains("0 of 3"), table);
        assertTrue(table.contains("11.0"), table); // median of 10, 11, 12 ms
        assertTrue(table.contains("recommends bf16: it has bf16"), table);
        // every row has a cell per run: the separators line up
        int bar = lines[0].indexOf('|');
        for (String line : lines) {
            if (line.contains("|")) {
                assertEquals(bar, line.indexOf('|'), "misaligned row: " + line);
            }
        }
    }

    @Test
    void lossScaleSummaryShowsTheRangeOfAScaledRun() {
        RunResult.Builder b = RunResult.builder();
        b.device = Device.cpu();
        b.policyName = "mixed_float16";
        b.precision = Precision.FP16;
        b.mixedPrecision = true;
        b.lossScaling = "dynamic (from 65536, x2 every 2000 clean steps, x0.5 on overflow)";
        b.losses.addAll(List.of(1f, 1f, 1f));
        b.lossScales.addAll(List.of(32768f, 16384f, 32768f));
        b.skippedSteps.addAll(List.of(0, 1));
        RunResult fp16 = b.build();
        assertTrue(fp16.isLossScaled());
        assertEquals(16384f, fp16.getMinLossScale());
        assertEquals(32768f, fp16.getMaxLossScale());
        assertEquals(32768f, fp16.getFinalLossScale());
        assertEquals(2, fp16.getSkippedCount());
        String table = new DoctorReport(List.of(fp16), Device.cpu(), null).toTable();
        assertTrue(table.contains("32768 (16384 to 32768)"), table);
        assertTrue(table.contains("2 of 3"), table);
    }

    @Test
    void labelsAndKeysNameTheAutoPolicy() {
        RunResult auto = run("auto", Precision.BF16, true, 1);
        assertEquals("bf16 (auto)", auto.getLabel());
        assertEquals("auto_bf16", auto.getKey());
        RunResult fp16 = run("mixed_float16", Precision.FP16, true, 1);
        assertEquals("fp16", fp16.getLabel());
        assertEquals("fp16", fp16.getKey());
    }

    @Test
    void scalesAreFormattedAsIntegersWhenTheyAreOne() {
        assertEquals("65536", DoctorRun.formatScale(65536f));
        assertEquals("0.5", DoctorRun.formatScale(0.5f));
    }

    private static PlatformReport platform(PlatformCase... cases) {
        boolean defect = List.of(cases).stream().anyMatch(PlatformCase::isDefect);
        return new PlatformReport(
                "cpu()",
                true,
                "PyTorch 2.7.1",
                List.of(cases),
                List.of(4242L),
                null,
                defect ? PlatformReport.Cure.VERIFIED : PlatformReport.Cure.NOT_NEEDED,
                List.of(),
                null,
                3.5);
    }

    @Test
    void theTableSaysInOneLineThatThePlatformIsSound() {
        PlatformReport sound =
                platform(
                        new PlatformCase(
                                "fp32/conv", "fp32 conv", PlatformCase.Status.OK, "right"));
        DoctorReport report =
                new DoctorReport(
                        List.of(run("float32", Precision.FP32, false, 200)),
                        Device.cpu(),
                        null,
                        sound);
        assertSame(sound, report.getPlatformReport());
        String table = report.toTable();
        List<String> lines = table.lines().filter(l -> l.contains("Platform check")).toList();
        assertEquals(List.of(sound.summary()), lines, table);
        assertTrue(lines.get(0).startsWith("Platform check: sound. All 1 cases"), table);
        assertEquals(
                null,
                new DoctorReport(
                                List.of(run("float32", Precision.FP32, false, 1)),
                                Device.cpu(),
                                null)
                        .getPlatformReport());
    }

    @Test
    void theTableNamesAPlatformDefectWithItsCure() {
        PlatformReport defective =
                platform(
                        new PlatformCase(
                                "fp32/conv1x1",
                                "fp32 conv 1x1, 256 -> 64 channels on (4, 256, 8, 8)",
                                PlatformCase.Status.CRASHED,
                                "the JVM died on SIGFPE (0x8), exit code 1"),
                        new PlatformCase("bf16/conv", "bf16 conv", PlatformCase.Status.OK, ""));
        String table =
                new DoctorReport(
                                List.of(run("float32", Precision.FP32, false, 200)),
                                Device.cpu(),
                                null,
                                defective)
                        .toTable();
        assertTrue(
                table.contains(
                        "Platform check: DEFECTS FOUND on cpu() with PyTorch 2.7.1: 1 case crashed the JVM"),
                table);
        assertTrue(
                table.contains(
                        "CRASHED fp32 conv 1x1, 256 -> 64 channels on (4, 256, 8, 8): the JVM died on SIGFPE"),
                table);
        assertTrue(
                table.contains(
                        "ONEDNN_MAX_CPU_ISA=AVX2 in the environment cures it (verified here)."),
                table);
        assertTrue(
                table.contains(
                        "Check again: ONEDNN_MAX_CPU_ISA=AVX2 " + PlatformCheck.RECHECK_COMMAND),
                table);
        assertTrue(table.indexOf("Device: ") < table.indexOf("Platform check"), table);
    }
}
