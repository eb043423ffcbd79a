package io.github.djlamp.amp.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
 * crash, and says "verified here" where the cure removes the defect.
 */
class PlatformCheckDefectTest {

    private static PlatformReport report;
    private static final Set<Path> ERROR_FOLDERS = new TreeSet<>();

    @BeforeAll
    static void runTheDefectSuite() {
        report = check(DefectSuite.class);
    }

    @AfterAll
    static void deleteTheJvmErrorFiles() throws IOException {
        List<PlatformCase> all = new ArrayList<>(report.getCases());
        all.addAll(report.getCureCases());
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
        return PlatformCheck.builder()
                .suite(suite)
                .environment(PlatformCheck.CURE_VARIABLE, null)
                .optTimeout(Duration.ofMinutes(2))
                .build()
                .check();
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
     * Whether the child JVMs compute on the CPU, where the oneDNN cure applies; on a GPU machine
     * DJL's default device is gpu(0) and the right outcome is that the cure does not apply.
     */
    private static boolean childrenComputeOnTheCpu(PlatformReport report) {
        if (report.getDevice().startsWith("cpu")) {
            return true;
        }
        assertEquals(PlatformReport.Cure.NOT_APPLICABLE, report.getCure(), report.toString());
        assertTrue(
                report.toString().contains("does not apply to " + report.getDevice()),
                report.toString());
        return false;
    }

    @Test
    void theCureIsTriedAndDoesNotCureADeliberateCrash() {
        if (!childrenComputeOnTheCpu(report)) {
            return;
        }
        assertEquals(PlatformReport.Cure.DID_NOT_CURE, report.getCure(), report.toDetailedString());
        List<PlatformCase> cured = report.getCureCases();
        assertEquals(5, cured.size(), report.toDetailedString());
        assertEquals(PlatformCase.Status.CRASHED, find(cured, DefectSuite.SIGFPE).getStatus());
        assertEquals(PlatformCase.Status.CRASHED, find(cured, DefectSuite.ABORT).getStatus());
        assertEquals(PlatformCase.Status.WRONG, find(cured, DefectSuite.WRONG).getStatus());
        String text = report.toString();
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
        PlatformReport curable = check(CurableSuite.class);
        if (!childrenComputeOnTheCpu(curable)) {
            return;
        }
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
}
