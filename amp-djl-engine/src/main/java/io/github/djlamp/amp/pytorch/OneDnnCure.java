package io.github.djlamp.amp.pytorch;

import com.sun.jna.Function;
import com.sun.jna.NativeLibrary;
import io.github.djlamp.amp.verify.RememberedVerdicts;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Cures, in this process, a machine whose oneDNN kernels are known wrong: where a kept verdict says
 * the platform is unsound (amp-doctor's platform check found defects its cure mended, or a kernel
 * check found fp32 itself wrong), sets {@code ONEDNN_MAX_CPU_ISA=AVX2} in the process's environment
 * with {@code setenv} before oneDNN's first kernel (oneDNN reads it then, once), checks with {@link
 * OneDnnIsaProbe} that oneDNN runs under it, and says so in one line. Where a oneDNN kernel already
 * ran, it is too late: the line says what to set before the JVM starts.
 *
 * <p>Once per process. A user opts out with {@code AmpOptions.builder().platformCure(false)} or
 * {@code -Ddjlamp.platformCure=false}.
 */
final class OneDnnCure {

    /** What became of the cure. */
    enum Outcome {
        /** No kept verdict says the platform is unsound: nothing done. */
        NOT_NEEDED,
        /** The user opted out: nothing done, the WARN says what to set. */
        OPTED_OUT,
        /** A cap at or below the cure's is already in force: nothing done. */
        ALREADY_IN_FORCE,
        /** Set in this process, and oneDNN runs under it. */
        APPLIED,
        /** Set, but oneDNN had already started and runs above it: the WARN says what to set. */
        TOO_LATE
    }

    /**
     * A test's stand-in for a kept unsound verdict, read once: the platform is taken as unsound,
     * cured by the cap it names (for example {@code AVX}, below this machine's own ISA, so that a
     * test sees the cap take or not).
     */
    static final String TEST_PROPERTY = "djlamp.test.assumeUnsoundCuredBy";

    private static final String TEST_CAP = System.getProperty(TEST_PROPERTY);
    private static final String CURE_CAP = "AVX2";

    private static final Logger logger = LoggerFactory.getLogger(OneDnnCure.class);

    private static Outcome outcome;
    private static OneDnnIsaProbe.Seen seen;

    private OneDnnCure() {}

    /**
     * Applies the cure where needed and allowed, the first time it is called in this process.
     *
     * @param allowed false when the user opted out
     * @param unsound whether a kept verdict says this platform is unsound
     * @return what became of it
     */
    static synchronized Outcome cureOnce(boolean allowed, BooleanSupplier unsound) {
        if (outcome == null) {
            outcome = cure(allowed, unsound);
        }
        return outcome;
    }

    /** The probe's lines after an attempt, or null. */
    static synchronized String lastProbe() {
        return seen == null ? null : seen.toString();
    }

    /** Whether a kept verdict under the key in force says the platform is unsound. */
    static boolean keptUnsound(PtAmpBackend backend) {
        if (TEST_CAP != null) {
            return true;
        }
        RememberedVerdicts memory = RememberedVerdicts.current();
        return memory.keptPlatformUnsound(RememberedVerdicts.keyFor(backend));
    }

    private static Outcome cure(boolean allowed, BooleanSupplier unsound) {
        String cap = TEST_CAP != null ? TEST_CAP : CURE_CAP;
        String setting = OneDnnIsa.VARIABLE + "=" + cap;
        if (!unsound.getAsBoolean()) {
            return Outcome.NOT_NEEDED;
        }
        String before = OneDnnIsa.capInForce();
        if (before != null && OneDnnIsaProbe.rankOfCap(before) <= OneDnnIsaProbe.rankOfCap(cap)) {
            return Outcome.ALREADY_IN_FORCE;
        }
        if (!allowed) {
            logger.warn(
                    "djl-amp: this machine's oneDNN kernels were found wrong (a kept verdict of"
                            + " djl-amp's checks), and the cure is turned off: start the JVM with {}"
                            + " in its environment, or let djl-amp set it (AmpOptions"
                            + " platformCure(true))",
                    setting);
            return Outcome.OPTED_OUT;
        }
        setenv(OneDnnIsa.VARIABLE, cap);
        OneDnnIsa.setInProcess(cap);
        try {
            seen = OneDnnIsaProbe.probe();
        } catch (RuntimeException | UnsatisfiedLinkError e) {
            seen = new OneDnnIsaProbe.Seen(java.util.List.of("probe failed: " + e));
        }
        if (seen.runsAtMost(cap)) {
            logger.warn(
                    "djl-amp: this machine's oneDNN kernels were found wrong (a kept verdict of"
                            + " djl-amp's checks; PyTorch issue 163347), so djl-amp set {} in this"
                            + " process before oneDNN's first kernel, and oneDNN runs under it"
                            + " (checked). AmpOptions platformCure(false) turns this off.",
                    setting);
            return Outcome.APPLIED;
        }
        // oneDNN ignores it now: the key of kept verdicts must say what runs
        restore(before);
        logger.warn(
                "djl-amp: this machine's oneDNN kernels were found wrong (a kept verdict of"
                        + " djl-amp's checks; PyTorch issue 163347), and it is too late to cure"
                        + " them in this JVM: a oneDNN kernel ran before Amp.configure, and oneDNN"
                        + " fixes its instruction set at its first kernel (it runs: {}). Start the"
                        + " JVM with {} in its environment, or call Amp.configure before running"
                        + " any model. Until then the results of this JVM's convolutions, fp32"
                        + " included, may be wrong.",
                seen,
                setting);
        return Outcome.TOO_LATE;
    }

    private static void restore(String before) {
        OneDnnIsa.setInProcess(null);
        if (before == null) {
            libc("unsetenv").invokeInt(new Object[] {OneDnnIsa.VARIABLE});
        } else {
            setenv(OneDnnIsa.VARIABLE, before);
        }
    }

    private static void setenv(String name, String value) {
        int result = libc("setenv").invokeInt(new Object[] {name, value, 1});
        if (result != 0) {
            throw new IllegalStateException("setenv(" + name + ") failed");
        }
    }

    private static Function libc(String name) {
        return NativeLibrary.getInstance(com.sun.jna.Platform.C_LIBRARY_NAME).getFunction(name);
    }
}
