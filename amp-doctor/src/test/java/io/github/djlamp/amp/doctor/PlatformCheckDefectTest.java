package io.github.djlamp.amp.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import ai.djl.Device;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The check's mechanisms, proven with suites that are wrong and crash on purpose: a wrong result is
 * reported wrong with its finding; a JVM killed by a case is reported as a crash of that case, with
 * its signal and the problematic frame of the JVM's error file, and a new child runs the cases
 * after it; the re-run with the cure runs and says honestly that it did not cure a deliberate
 * crash, and says "verified here" where the cure removes the defect. The suites run on DJL's
 * default device; the cure's tests run on the CPU, the cure's device, on a GPU machine too.
 */
class PlatformCheckDefectTest {

    private static PlatformReport report;
    private static final List<PlatformReport> CHECKED = new ArrayList<>();
    private static final Set<Path> ERROR_FOLDERS = new TreeSet<>();

    @BeforeAll
    static void runTheDefectSuite() {
        report = check(DefectSuite.class);
    }

    @AfterAll
    static void deleteTheJvmErrorFiles() throws IOException {
        List<PlatformCase> all = new ArrayList<>();
        for (PlatformReport checked : CHECKED) {
            all.addAll(checked.getCases());
            all.addAll(checked.getCureCases());
        }
        for (PlatformCase c : all) {
            errorFile(c.getDetail());
        }
        for (Path folder : ERROR_FOLDERS) {
            if (!Files.isDirectory(folder)) {
                continue;
            }
            try (Stream<Path> files = Files.list(folder)) {
                for (Path file : (Iterable<Path>) files::iterator) {
                    Files.deleteIfExists(file);
                }
            }
            Files.deleteIfExists(folder);
        }
    }

    private static PlatformReport check(Class<? extends PlatformSuite> suite) {
        return check(suite, null);
    }

    /** The check of a suite on {@code device}, or on DJL's default device when it is null. */
    private static PlatformReport check(Class<? extends PlatformSuite> suite, Device device) {
        PlatformCheck.Builder builder =
                PlatformCheck.builder()
                        .suite(suite)
                        .environment(PlatformCheck.CURE_VARIABLE, null)
                        .optTimeout(Duration.ofMinutes(2));
        if (device != null) {
            builder.device(device);
        }
        PlatformReport checked = builder.build().check();
        CHECKED.add(checked);
        return checked;
    }

    /** The JVM error file a crash's detail names, remembered for deletion; or null. */
    private static Path errorFile(String detail) {
        String marker = "; JVM error file ";
        int at = detail.indexOf(marker);
        if (at < 0) {
            return null;
        }
        Path file = Path.of(detail.substring(at + marker.length()));
        ERROR_FOLDERS.add(file.getParent());
        return file;
    }

    private static PlatformCase find(List<PlatformCase> cases, String id) {
        return cases.stream()
                .filter(c -> c.getId().equals(id))
                .findFirst()
                .orElseThrow(() -> new AssertionError("no case " + id + " in " + cases));
    }

    @Test
    void aWrongResultIsReportedWrongWithWhatIsWrong() {
        PlatformCase wrong = find(report.getCases(), DefectSuite.WRONG);
        assertEquals(PlatformCase.Status.WRONG, wrong.getStatus(), wrong.toString());
        // every output value is off by 0.25; the gradients do not depend on the shift
        assertTrue(
                wrong.getDetail().startsWith("output: 288 of 288 values wrong (100.0%)"),
                wrong.getDetail());
        assertTrue(!wrong.getDetail().contains("gradient"), wrong.getDetail());
        assertTrue(
                report.toString().contains("WRONG a convolution whose output is off by 0.25"),
                report.toString());
    }

    @Test
    void aNativeCrashIsReportedAsACrashOfItsCaseWithTheProblematicFrame() throws IOException {
        PlatformCase crash = find(report.getCases(), DefectSuite.SIGFPE);
        assertEquals(PlatformCase.Status.CRASHED, crash.getStatus(), crash.toString());
        String detail = crash.getDetail();
        assertTrue(
                detail.startsWith("the JVM died on SIGFPE (0x8) (sent by kill), exit code "),
                detail);
        assertTrue(detail.contains("Problematic frame: C [libc.so"), detail);
        Path errorFile = errorFile(detail);
        assertNotNull(errorFile, detail);
        assertTrue(Files.readString(errorFile).contains("SIGFPE"), errorFile.toString());
    }

    @Test
    void aCrashWithoutAnErrorFileIsReportedWithItsSignalAndLastWords() {
        PlatformCase crash = find(report.getCases(), DefectSuite.ABORT);
        assertEquals(PlatformCase.Status.CRASHED, crash.getStatus(), crash.toString());
        assertTrue(
                crash.getDetail().contains("killed by SIGABRT (exit code 134)"), crash.getDetail());
        assertTrue(crash.getDetail().contains("terminate called"), crash.getDetail());
    }

    @Test
    void afterEachCrashANewChildRunsTheCasesLeft() {
        assertEquals(3, report.getChildPids().size(), report.toDetailedString());
        assertEquals(5, report.getCases().size(), report.toDetailedString());
        assertEquals(PlatformCase.Status.OK, report.getCases().get(0).getStatus());
        assertEquals(
                PlatformCase.Status.OK, find(report.getCases(), DefectSuite.AFTER).getStatus());
        assertEquals(PlatformReport.Verdict.DEFECTS_FOUND, report.getVerdict());
        assertEquals(1, report.exitCode());
        assertEquals(3, report.getDefects().size());
        assertTrue(
                report.summary()
                        .contains(
                                "1 case computed wrong, 2 cases crashed the JVM (of 5 cases, in 3 child JVMs"),
                report.summary());
    }

    /**
     * The cure's tests run on the CPU, whatever DJL's default device is: ONEDNN_MAX_CPU_ISA=AVX2 is
     * a cure for oneDNN, the CPU's kernels. On a CPU machine the suite's report above already ran
     * there.
     */
    private static PlatformReport onTheCpu(Class<? extends PlatformSuite> suite) {
        if (suite == DefectSuite.class && isCpu(report)) {
            return report;
        }
        PlatformReport onCpu = check(suite, Device.cpu());
        assertEquals("cpu()", onCpu.getDevice(), onCpu.toDetailedString());
        return onCpu;
    }

    private static boolean isCpu(PlatformReport report) {
        return report.getDevice().startsWith("cpu");
    }

    @Test
    void theCureIsTriedAndDoesNotCureADeliberateCrash() {
        PlatformReport onCpu = onTheCpu(DefectSuite.class);
        assertEquals(PlatformReport.Cure.DID_NOT_CURE, onCpu.getCure(), onCpu.toDetailedString());
        List<PlatformCase> cured = onCpu.getCureCases();
        assertEquals(5, cured.size(), onCpu.toDetailedString());
        assertEquals(PlatformCase.Status.CRASHED, find(cured, DefectSuite.SIGFPE).getStatus());
        assertEquals(PlatformCase.Status.CRASHED, find(cured, DefectSuite.ABORT).getStatus());
        assertEquals(PlatformCase.Status.WRONG, find(cured, DefectSuite.WRONG).getStatus());
        String text = onCpu.toString();
        assertTrue(
                text.contains(PlatformCheck.CURE + " in the environment did not cure it."), text);
        assertTrue(text.contains("3 cases still not right: it did not cure this platform."), text);
        assertTrue(text.contains("No known cure worked here."), text);
        assertTrue(text.contains("Check again: " + PlatformCheck.RECHECK_COMMAND), text);
        assertTrue(text.contains("PyTorch issue 163347"), text);
        assertTrue(text.contains("OpenVINO issue 38256"), text);
    }

    @Test
    void aCureThatRemovesTheDefectIsVerifiedHere() {
        PlatformReport curable = onTheCpu(CurableSuite.class);
        String text = curable.toString();
        assertEquals(PlatformReport.Verdict.DEFECTS_FOUND, curable.getVerdict(), text);
        assertEquals(
                PlatformCase.Status.WRONG,
                find(curable.getCases(), CurableSuite.CURABLE).getStatus(),
                text);
        assertEquals(PlatformReport.Cure.VERIFIED, curable.getCure(), text);
        assertEquals(
                PlatformCase.Status.OK,
                find(curable.getCureCases(), CurableSuite.CURABLE).getStatus(),
                text);
        assertTrue(
                text.contains(PlatformCheck.CURE + " in the environment cures it (verified here)."),
                text);
        assertTrue(text.contains("`export ONEDNN_MAX_CPU_ISA=AVX2`"), text);
        assertTrue(
                text.contains(
                        "Check again: ONEDNN_MAX_CPU_ISA=AVX2 " + PlatformCheck.RECHECK_COMMAND),
                text);
        assertNotNull(curable.advice());
    }

    @Test
    void theChildrenComputeOnTheDeviceTheCheckIsGiven() {
        // a device no machine here has: the child names it before its first case
        PlatformReport elsewhere = check(CurableSuite.class, Device.gpu(99));
        assertEquals("gpu(99)", elsewhere.getDevice(), elsewhere.toDetailedString());
        assertEquals(PlatformReport.Cure.NOT_APPLICABLE, elsewhere.getCure());
    }

    /** On a GPU the CPU's cure is not tried, and the advice is the GPU's. */
    @Test
    void onAGpuTheCpuCureDoesNotApply() {
        assumeFalse(
                isCpu(report),
                "the children compute on "
                        + report.getDevice()
                        + ", DJL's default device: a GPU is needed to see the CPU cure not apply");
        assertEquals(PlatformReport.Verdict.DEFECTS_FOUND, report.getVerdict());
        assertEquals(PlatformReport.Cure.NOT_APPLICABLE, report.getCure(), report.toString());
        assertTrue(report.getCureCases().isEmpty(), report.toDetailedString());
        String text = report.toString();
        assertTrue(
                text.contains(
                        "The CPU cure "
                                + PlatformCheck.CURE
                                + " does not apply to "
                                + report.getDevice()
                                + "."),
                text);
        String advice = String.join("\n", report.advice());
        assertTrue(advice.contains("update the GPU driver and CUDA libraries"), advice);
        assertFalse(advice.contains("export " + PlatformCheck.CURE_VARIABLE), advice);
    }
}
