package io.github.djlamp.amp.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.verify.RememberedVerdicts;
import io.github.djlamp.amp.verify.VerdictMemory;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The platform check's report kept on disk: {@link PlatformCheck#cached()} reuses a kept report
 * without running a child JVM, and a recheck does not read it.
 */
class KeptPlatformReportTest {

    @TempDir Path folder;

    @BeforeEach
    void rememberInAFreshFolder() {
        RememberedVerdicts.use(VerdictMemory.REMEMBER, folder);
        PlatformCheck.forgetCached();
    }

    @AfterEach
    void stopRemembering() {
        RememberedVerdicts.use(VerdictMemory.OFF, folder);
        PlatformCheck.forgetCached();
    }

    @Test
    void aReportReadsBackAsItWasWritten() {
        PlatformReport report = unsoundReport();
        PlatformReport back = KeptPlatformReport.fromFields(KeptPlatformReport.toFields(report));
        assertEquals(describe(report.getCases()), describe(back.getCases()));
        assertEquals(describe(report.getCureCases()), describe(back.getCureCases()));
        assertEquals(report.getDevice() + report.getEngine(), back.getDevice() + back.getEngine());
        assertEquals(report.getSeconds(), back.getSeconds());
        assertEquals(report.getVerdict(), back.getVerdict());
        assertEquals(report.getCure(), back.getCure());
    }

    @Test
    void cachedReusesTheKeptReportWithoutAChildJvm() {
        AmpBackend backend = AmpBackends.forEngine(Engine.getDefaultEngineName());
        // a report no check of this machine would write: only the disk can have given it
        KeptPlatformReport.remember(
                RememberedVerdicts.current(),
                backend,
                PlatformCheck.CACHED_SIGNATURE,
                unsoundReport());
        PlatformCheck.forgetCached();
        RememberedVerdicts.use(VerdictMemory.OFF, folder); // what a new JVM reads: the file
        RememberedVerdicts.use(VerdictMemory.REMEMBER, folder);
        PlatformReport reused = PlatformCheck.cached();
        assertEquals(PlatformReport.Verdict.DEFECTS_FOUND, reused.getVerdict());
        assertTrue(reused.getChildPids().isEmpty(), "no child JVM ran");
        assertEquals("kept by a test", reused.getDefects().get(0).getDetail());
        assertSame(reused, PlatformCheck.cached(), "once per JVM");
    }

    @Test
    void aCuredDefectIsKeptWhereTheEngineLooksBeforeItsFirstKernel() {
        AmpBackend backend = AmpBackends.forEngine(Engine.getDefaultEngineName());
        String key = RememberedVerdicts.keyFor(backend);
        assertFalse(RememberedVerdicts.current().keptPlatformUnsound(key));
        KeptPlatformReport.remember(
                RememberedVerdicts.current(),
                backend,
                PlatformCheck.CACHED_SIGNATURE,
                unsoundReport());
        assertTrue(RememberedVerdicts.current().keptPlatformUnsound(key));
    }

    @Test
    void recheckDoesNotReadTheKeptReport() {
        AmpBackend backend = AmpBackends.forEngine(Engine.getDefaultEngineName());
        KeptPlatformReport.remember(
                RememberedVerdicts.current(),
                backend,
                PlatformCheck.CACHED_SIGNATURE,
                unsoundReport());
        RememberedVerdicts.use(VerdictMemory.RECHECK, folder);
        assertNull(
                KeptPlatformReport.recall(
                        RememberedVerdicts.current(), backend, PlatformCheck.CACHED_SIGNATURE));
    }

    @Test
    void aReportWhoseCheckCouldNotRunIsNotKept() {
        AmpBackend backend = AmpBackends.forEngine(Engine.getDefaultEngineName());
        PlatformReport notChecked =
                new PlatformReport(
                        "cpu()",
                        true,
                        "PyTorch 2.7.1",
                        List.of(),
                        List.of(),
                        "cannot run a child JVM: test",
                        PlatformReport.Cure.NOT_TRIED,
                        List.of(),
                        null,
                        0.1);
        KeptPlatformReport.remember(
                RememberedVerdicts.current(), backend, PlatformCheck.CACHED_SIGNATURE, notChecked);
        assertNull(
                KeptPlatformReport.recall(
                        RememberedVerdicts.current(), backend, PlatformCheck.CACHED_SIGNATURE));
    }

    private static String describe(List<PlatformCase> cases) {
        StringBuilder sb = new StringBuilder();
        for (PlatformCase c : cases) {
            sb.append(c.getId())
                    .append('|')
                    .append(c.getDescription())
                    .append('|')
                    .append(c.getStatus())
                    .append('|')
                    .append(c.getDetail())
                    .append('\n');
        }
        return sb.toString();
    }

    @Test
    void aKeptSoundReportSaysItWasKeptNotWhichChildRanIt() {
        PlatformReport sound =
                new PlatformReport(
                        "cpu()",
                        true,
                        "PyTorch 2.7.1",
                        List.of(
                                new PlatformCase(
                                        "fp32/gemm", "fp32 gemm", PlatformCase.Status.OK, "")),
                        List.of(4242L),
                        null,
                        PlatformReport.Cure.NOT_NEEDED,
                        List.of(),
                        null,
                        6.5);
        assertTrue(sound.summary().contains("in a child JVM (pid 4242,"), sound.summary());
        String kept = KeptPlatformReport.fromFields(KeptPlatformReport.toFields(sound)).summary();
        assertTrue(kept.startsWith("Platform check: sound, as an earlier check"), kept);
        assertFalse(kept.contains("pid"), kept);
    }

    private static PlatformReport unsoundReport() {
        return new PlatformReport(
                "cpu()",
                true,
                "PyTorch 2.7.1",
                List.of(
                        new PlatformCase(
                                "fp32/conv5x5",
                                "fp32 conv 5x5\tdescribed",
                                PlatformCase.Status.WRONG,
                                "kept by a test"),
                        new PlatformCase("fp32/gemm", "fp32 gemm", PlatformCase.Status.OK, "")),
                List.of(4242L),
                null,
                PlatformReport.Cure.VERIFIED,
                List.of(
                        new PlatformCase(
                                "fp32/conv5x5", "fp32 conv 5x5", PlatformCase.Status.OK, "")),
                null,
                6.5);
    }
}
