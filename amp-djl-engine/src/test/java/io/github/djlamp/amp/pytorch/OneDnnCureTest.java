package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The in-process cure of an unsound platform, driven by the test's stand-in for a kept unsound
 * verdict ({@value OneDnnCure#TEST_PROPERTY}) with a cure of {@code AVX}: below this machine's own
 * ISA (AVX2 or better), so that oneDNN's own verbose report tells whether the cap took. Each case
 * is a new JVM: oneDNN fixes its ISA once per process.
 */
class OneDnnCureTest {

    @Test
    void theCureSetBeforeOneDnnsFirstKernelTakes() throws Exception {
        String out = child("AVX", "configure-first", "allowed");
        assertTrue(out.contains("cure-outcome=APPLIED"), out);
        // oneDNN's own words, printed at its first kernel: the cap, not the CPU's best
        assertTrue(out.contains("isa:Intel AVX"), out);
        assertFalse(out.contains("isa:Intel AVX2") || out.contains("AVX-512"), out);
        assertTrue(out.contains("cap-in-force=AVX\n"), out);
        assertTrue(out.contains("ONEDNN_MAX_CPU_ISA=AVX,"), "in the verdicts' key: " + out);
        assertTrue(out.contains("set ONEDNN_MAX_CPU_ISA=AVX in this process"), out);
    }

    @Test
    void afterAOneDnnKernelTheCureSaysItIsTooLate() throws Exception {
        String out = child("AVX", "kernel-first", "allowed");
        assertTrue(out.contains("cure-outcome=TOO_LATE"), out);
        assertTrue(out.contains("too late"), out);
        assertTrue(out.contains("Start the JVM with ONEDNN_MAX_CPU_ISA=AVX"), out);
        // the key of kept verdicts says what runs: no cap
        assertTrue(out.contains("cap-in-force=null"), out);
    }

    @Test
    void aUserWhoOptedOutIsToldWhatToSet() throws Exception {
        String out = child("AVX", "configure-first", "opted-out");
        assertTrue(out.contains("cure-outcome=OPTED_OUT"), out);
        assertTrue(out.contains("start the JVM with ONEDNN_MAX_CPU_ISA=AVX"), out);
        assertTrue(out.contains("cap-in-force=null"), out);
    }

    @Test
    void withoutAnUnsoundVerdictNothingIsTouched() throws Exception {
        String out = child(null, "configure-first", "allowed");
        assertTrue(out.contains("cure-outcome=NOT_NEEDED"), out);
        assertTrue(out.contains("cure-probe=null"), out);
    }

    private static String child(String cure, String order, String allowed) throws Exception {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx1g");
        command.add("-Dai.djl.offline=true");
        command.add("-Ddjlamp.verdicts=off");
        if (cure != null) {
            command.add("-D" + OneDnnCure.TEST_PROPERTY + "=" + cure);
        }
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(CureChild.class.getName());
        command.add(order);
        command.add(allowed);
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        // the cap must come from the cure alone
        builder.environment().remove(OneDnnIsa.VARIABLE);
        builder.environment().remove(OneDnnIsa.OLD_VARIABLE);
        builder.environment().remove("ONEDNN_VERBOSE");
        Process process = builder.start();
        String output = new String(process.getInputStream().readAllBytes());
        assertEquals(0, process.waitFor(), output);
        return output;
    }
}
