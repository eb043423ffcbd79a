package io.github.djlamp.amp.pytorch;

import io.github.djlamp.amp.verify.CacheTopology;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps oneDNN away from a CPU whose kernel hides its cache topology ({@link CacheTopology}): there
 * oneDNN sizes its convolution blocking from cache sizes it cannot read, and a convolution's
 * backward divided by zero ({@code brg_blocking_t::est_eff_1x1}, SIGFPE) and ended the JVM, in
 * plain DJL fp32 too and under {@code ONEDNN_MAX_CPU_ISA=AVX2} (issue 43: ResNet-50 on CIFAR-shaped
 * data). So djl-amp turns libtorch's own switch for oneDNN off for the whole process ({@link
 * LibtorchOneDnn}, what {@code torch.backends.mkldnn.enabled = False} sets): ATen then picks its
 * own convolution kernels, forward and backward (it picks the backward's again from the same
 * switch), right and slower. No kept verdict is asked: the SIGFPE ends the JVM before one could be
 * kept.
 *
 * <p>Once per process, at {@code Amp.configure}; one WARN says what was done, or, where the user
 * opted out ({@code AmpOptions.builder().platformCure(false)}, {@code
 * -Ddjlamp.platformCure=false}), what the risk is.
 */
final class HiddenCacheCure {

    /** What became of it. */
    enum Outcome {
        /** The kernel shows the cache topology: oneDNN left on. */
        NOT_NEEDED,
        /** The user opted out: oneDNN left on, the WARN says the risk. */
        OPTED_OUT,
        /** oneDNN is off for the process (read back). */
        APPLIED,
        /** The switch could not be reached, or reads on after being set off. */
        FAILED
    }

    private static final String WHY =
            "djl-amp: this machine hides its CPU cache topology (nothing under "
                    + CacheTopology.CPU0_CACHE
                    + ", as under some hypervisors), and oneDNN sizes its convolution blocking from"
                    + " the cache sizes: on such a machine a convolution's backward divided by zero"
                    + " inside oneDNN and ended the JVM (SIGFPE), plain DJL fp32 and"
                    + " ONEDNN_MAX_CPU_ISA=AVX2 included, and its AVX-512 kernels computed wrong.";

    private static final Logger logger = LoggerFactory.getLogger(HiddenCacheCure.class);

    private static Outcome outcome;

    private HiddenCacheCure() {}

    /**
     * Decides and acts the first time it is called in this process; later calls return the same.
     *
     * @param allowed false when the user opted out of djl-amp's platform cures
     * @return what became of it
     */
    static synchronized Outcome cureOnce(boolean allowed) {
        if (outcome == null) {
            outcome = cure(allowed, CacheTopology::isHidden);
        }
        return outcome;
    }

    /** What became of it in this process, or null before {@code Amp.configure}. */
    static synchronized Outcome outcome() {
        return outcome;
    }

    private static Outcome cure(boolean allowed, BooleanSupplier hidden) {
        if (!hidden.getAsBoolean()) {
            return Outcome.NOT_NEEDED;
        }
        if (!allowed) {
            logger.warn(
                    "{} The platform cure is turned off (AmpOptions platformCure(false)), so"
                            + " libtorch keeps using oneDNN: a convolution of this JVM may end it,"
                            + " or compute wrong. Let djl-amp turn oneDNN off (platformCure(true),"
                            + " the default).",
                    WHY);
            return Outcome.OPTED_OUT;
        }
        boolean stillOn;
        try {
            stillOn = LibtorchOneDnn.get().disableForProcess();
        } catch (RuntimeException | UnsatisfiedLinkError e) {
            logger.warn(
                    "{} djl-amp could not reach libtorch's switch for oneDNN ({}), so oneDNN stays"
                            + " on: a convolution of this JVM may end it, or compute wrong.",
                    WHY,
                    e.toString());
            return Outcome.FAILED;
        }
        if (stillOn) {
            logger.warn(
                    "{} djl-amp set libtorch's switch for oneDNN off, but it still reads on: a"
                            + " convolution of this JVM may end it, or compute wrong.",
                    WHY);
            return Outcome.FAILED;
        }
        logger.warn(
                "{} So djl-amp turned libtorch's oneDNN off for this process"
                        + " (at::Context::setUserEnabledMkldnn(false); it reads off): convolutions"
                        + " on the CPU run libtorch's own kernels, right and slower (a fp32"
                        + " ResNet-50 training step took 1.5x as long on an AVX2 CPU;"
                        + " bench/RESULTS.md), and 'auto' chooses fp32 on the CPU."
                        + " AmpOptions.builder().platformCure(false) or -Ddjlamp.platformCure=false"
                        + " keeps oneDNN on.",
                WHY);
        return Outcome.APPLIED;
    }
}
