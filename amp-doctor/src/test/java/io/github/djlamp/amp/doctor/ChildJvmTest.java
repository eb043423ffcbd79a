package io.github.djlamp.amp.doctor;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** How the parent reads a child's lines and a dead JVM's error file, without starting one. */
class ChildJvmTest {

    /** The head of the error file of the oneDNN crash (the frame as it was seen). */
    private static final String ONEDNN_HS_ERR =
            "#\n"
                    + "# A fatal error has been detected by the Java Runtime Environment:\n"
                    + "#\n"
                    + "#  SIGFPE (0x8) at pc=0x00007f3a1c2b5d1e, pid=4242, tid=4243\n"
                    + "#\n"
                    + "# JRE version: OpenJDK Runtime Environment (17.0.15+6)\n"
                    + "# Problematic frame:\n"
                    + "# C  [libtorch_cpu.so+0x5d1e]  dnnl::impl::cpu::x64::"
                    + "brgemm_convolution_bwd_utils::brg_blocking_t::est_eff_1x1()+0x3e\n"
                    + "#\n";

    @Test
    void theSignalAndTheProblematicFrameAreReadFromTheErrorFile(@TempDir Path dir)
            throws IOException {
        Path file = dir.resolve("hs_err_4242.log");
        Files.writeString(file, ONEDNN_HS_ERR);
        assertEquals(
                List.of(
                        "SIGFPE (0x8)",
                        "Problematic frame: C [libtorch_cpu.so+0x5d1e] dnnl::impl::cpu::x64::"
                                + "brgemm_convolution_bwd_utils::brg_blocking_t::est_eff_1x1()+0x3e"),
                ChildJvm.errorFileSummary(file));
        ChildJvm.Outcome died = new ChildJvm.Outcome(4242, 1, false, List.of(), null, file);
        assertEquals(
                "the JVM died on SIGFPE (0x8), exit code 1; Problematic frame: C"
                        + " [libtorch_cpu.so+0x5d1e] dnnl::impl::cpu::x64::"
                        + "brgemm_convolution_bwd_utils::brg_blocking_t::est_eff_1x1()+0x3e;"
                        + " JVM error file "
                        + file,
                ChildJvm.describeDeath(died, Duration.ofMinutes(1)));
    }

    @Test
    void aJvmKilledWithoutAnErrorFileIsNamedByItsSignal() {
        ChildJvm.Outcome killed =
                new ChildJvm.Outcome(7, 136, false, List.of(), "Floating point exception", null);
        assertEquals(
                "the JVM died, killed by SIGFPE (exit code 136); its last words: Floating point"
                        + " exception",
                ChildJvm.describeDeath(killed, Duration.ofMinutes(1)));
        ChildJvm.Outcome hung = new ChildJvm.Outcome(7, 137, true, List.of(), null, null);
        assertEquals(
                "still running after 60 s: the child JVM was killed",
                ChildJvm.describeDeath(hung, Duration.ofMinutes(1)));
    }

    @Test
    void aLineKeepsTheSpacesOfItsLastField() {
        assertArrayEquals(
                new String[] {"CASE", "bf16-contiguous/x", "WRONG", "output: 3 of 4 values wrong"},
                ChildJvm.parse("CASE bf16-contiguous/x WRONG output: 3 of 4 values wrong"));
        assertArrayEquals(
                new String[] {"CASE", "fp32/x", "OK", ""}, ChildJvm.parse("CASE fp32/x OK"));
        assertArrayEquals(
                new String[] {"START", "cpu", "PyTorch", "2.7.1", "cpu()"},
                ChildJvm.parse("START cpu PyTorch 2.7.1 cpu()"));
    }
}
