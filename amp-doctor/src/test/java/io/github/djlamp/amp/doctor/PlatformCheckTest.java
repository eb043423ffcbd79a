package io.github.djlamp.amp.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import io.github.djlamp.amp.verify.CanonicalKernels;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The platform check on this machine, which computes right (its CPU has no AVX512-BF16, the ISA
 * whose oneDNN kernels were found wrong): every case of the standard suite ran, in a child JVM, and
 * computed right.
 */
class PlatformCheckTest {

    @Test
    void thisMachineIsSoundAndEveryCaseRanRightInAChildJvmOrItsDefectsAreReported() {
        PlatformReport report =
                PlatformCheck.builder()
                        .environment(PlatformCheck.CURE_VARIABLE, null)
                        .build()
                        .check();
        String all = report.toDetailedString();
        if (report.getVerdict() == PlatformReport.Verdict.DEFECTS_FOUND) {
            // a machine of the defective kind: the check must say so coherently, with the cure
            // tried; which kernels are wrong is PlatformKernelsTest's question, against direct sums
            System.out.println("PLATFORM DEFECT found by the platform check:\n" + all);
            assertEquals(1, report.exitCode(), all);
            assertFalse(report.getDefects().isEmpty(), all);
            String advice = String.join("\n", report.advice());
            if (report.getDevice().startsWith("cpu")) {
                assertNotEquals(PlatformReport.Cure.NOT_NEEDED, report.getCure(), all);
                assertTrue(advice.contains(PlatformCheck.CURE_VARIABLE), all);
            } else {
                // oneDNN's cure is the CPU's: a GPU's defects get the GPU's advice
                assertEquals(PlatformReport.Cure.NOT_APPLICABLE, report.getCure(), all);
                assertTrue(advice.contains("update the GPU driver and CUDA libraries"), all);
            }
            return;
        }
        assertEquals(PlatformReport.Verdict.SOUND, report.getVerdict(), all);
        assertTrue(report.isSound(), all);
        assertEquals(0, report.exitCode(), all);

        List<String> planned = new ArrayList<>();
        for (KernelCase c : new StandardSuite().cases()) {
            planned.add(c.id());
        }
        List<String> ran = new ArrayList<>();
        for (PlatformCase c : report.getCases()) {
            ran.add(c.getId());
            assertEquals(PlatformCase.Status.OK, c.getStatus(), c.toString());
            // the child's own words: what it compared, and how long the case took there
            assertTrue(c.getDetail().matches(".*(right|within).* \\[\\d+ ms\\]"), c.toString());
        }
        assertEquals(planned, ran, "every case of the standard suite, in order");

        // one child ran them all: not this JVM, and not skipped
        assertEquals(1, report.getChildPids().size(), all);
        long child = report.getChildPids().get(0);
        assertNotEquals(ProcessHandle.current().pid(), child);
        // the children compute on DJL's default device: gpu(0) on a GPU machine
        assertEquals(Engine.getEngine("PyTorch").defaultDevice().toString(), report.getDevice());
        assertTrue(report.getEngine().startsWith("PyTorch "), report.getEngine());
        assertEquals(PlatformReport.Cure.NOT_NEEDED, report.getCure());
        assertTrue(report.getCureCases().isEmpty());
        assertTrue(report.advice().isEmpty());

        // on a sound platform it says so in one line
        String line = report.toString();
        assertEquals(1, line.lines().count(), line);
        assertTrue(line.startsWith("Platform check: sound."), line);
        assertTrue(line.contains("All " + planned.size() + " cases"), line);
        assertTrue(line.contains("fp32, bf16, fp16"), line);
        assertTrue(line.contains("in a child JVM (pid " + child + ","), line);
    }

    @Test
    void theChildComputesOnTheDeviceItIsGivenAndRefusesANameDjlCannotRead() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
        String suite = CurableSuite.class.getName();
        assertEquals(0, PlatformChild.run(new String[] {"--suite", suite, "--device", "cpu"}, out));
        String lines = bytes.toString(StandardCharsets.UTF_8);
        assertTrue(lines.contains(PlatformChild.PREFIX + " START cpu PyTorch "), lines);
        assertTrue(lines.contains(" cpu()\n"), lines);

        bytes.reset();
        // DJL's Device.toString() form, which Device.fromName does not read
        assertEquals(
                3, PlatformChild.run(new String[] {"--suite", suite, "--device", "cpu()"}, out));
        lines = bytes.toString(StandardCharsets.UTF_8);
        assertTrue(lines.contains(PlatformChild.PREFIX + " ABORT "), lines);
        assertTrue(lines.contains("cpu()"), lines);
        assertFalse(lines.contains(" START "), lines);
    }

    @Test
    void everyCanonicalLayerIsCheckedInFp32AndInBf16InBothLayouts() {
        List<String> descriptions = new ArrayList<>();
        for (KernelCase c : new StandardSuite().cases()) {
            descriptions.add(c.description());
        }
        List<String> canonical = CanonicalKernels.describe();
        assertEquals(StandardSuite.CANONICAL.size(), canonical.size(), canonical.toString());
        for (String layer : canonical) {
            List<String> prefixes = new ArrayList<>(List.of("fp32 ", "bf16 contiguous "));
            if (layer.startsWith("conv")) {
                prefixes.add("bf16 channels-last ");
            }
            for (String prefix : prefixes) {
                assertTrue(
                        descriptions.stream().anyMatch(d -> d.startsWith(prefix + layer + ":")),
                        prefix + layer + " is not among " + descriptions);
            }
        }
        for (LayerSpec bottleneck : StandardSuite.BOTTLENECK) {
            assertTrue(
                    descriptions.stream()
                            .anyMatch(d -> d.startsWith("fp32 " + bottleneck.describe())),
                    bottleneck.describe());
        }
        assertTrue(descriptions.stream().anyMatch(d -> d.startsWith("fp16 ")), "fp16 cases");
    }

    @Test
    void theCommandLinePrintsItsUsageAndRefusesAnUnknownOption() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
        assertEquals(0, PlatformCheck.main(new String[] {"--help"}, out));
        assertTrue(bytes.toString(StandardCharsets.UTF_8).contains("--verbose"));
        assertEquals(2, PlatformCheck.main(new String[] {"--bogus"}, out));
        assertTrue(bytes.toString(StandardCharsets.UTF_8).contains("unknown option --bogus"));
    }
}
