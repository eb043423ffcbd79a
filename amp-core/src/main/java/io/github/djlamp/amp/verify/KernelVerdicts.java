package io.github.djlamp.amp.verify;

import io.github.djlamp.amp.spi.AmpBackend;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The verdicts of every kernel check this process has made, keyed by operation signature: a
 * signature is checked once, whichever layer of whichever model meets it first (ResNet's repeated
 * shapes are checked once), and kept on disk for later JVMs ({@link RememberedVerdicts}).
 */
public final class KernelVerdicts {

    private static final Logger logger = LoggerFactory.getLogger(KernelVerdicts.class);

    private static final Map<String, KernelVerdict> VERDICTS = new ConcurrentHashMap<>();
    private static final List<KernelVerdict> IN_ORDER = new ArrayList<>();

    private KernelVerdicts() {}

    /** The verdict of a signature already reached in this process, or null. */
    static KernelVerdict get(String key) {
        return VERDICTS.get(key);
    }

    /** The verdict of a signature in this process, never kept on disk: for tests' records. */
    static KernelVerdict computeIfAbsent(String key, Supplier<KernelVerdict> check) {
        return VERDICTS.computeIfAbsent(
                key,
                k -> {
                    KernelVerdict verdict = check.get();
                    synchronized (IN_ORDER) {
                        IN_ORDER.add(verdict);
                    }
                    return verdict;
                });
    }

    /**
     * The verdict of a signature in this process: the one reached before, else one kept on disk for
     * this machine and libraries ({@link RememberedVerdicts}), else {@code check}'s, then kept. A
     * check that could not run is not kept: the next JVM tries again.
     */
    static KernelVerdict computeIfAbsent(
            String key, AmpBackend backend, String signature, Supplier<KernelVerdict> check) {
        return VERDICTS.computeIfAbsent(
                key,
                k -> {
                    KernelVerdict verdict = recallOrCheck(backend, signature, check);
                    synchronized (IN_ORDER) {
                        IN_ORDER.add(verdict);
                    }
                    return verdict;
                });
    }

    private static KernelVerdict recallOrCheck(
            AmpBackend backend, String signature, Supplier<KernelVerdict> check) {
        RememberedVerdicts memory = RememberedVerdicts.current();
        if (memory.getMemory() == VerdictMemory.OFF) {
            return check.get();
        }
        String fileKey = RememberedVerdicts.keyFor(backend);
        List<String> kept = memory.recall(fileKey, RememberedVerdicts.KERNEL, signature);
        if (kept != null) {
            try {
                return KernelVerdict.fromFields(kept);
            } catch (IllegalArgumentException e) {
                logger.warn(
                        "djl-amp: ignoring a kept kernel verdict in {} that does not read ({});"
                                + " checking '{}' again",
                        memory.fileFor(fileKey),
                        e.getMessage(),
                        signature);
            }
        }
        KernelVerdict verdict = check.get();
        if (verdict.getOutcome() != KernelVerdict.Outcome.NOT_CHECKED) {
            memory.remember(fileKey, RememberedVerdicts.KERNEL, signature, verdict.toFields());
        }
        return verdict;
    }

    /**
     * Returns every verdict reached in this process, in the order the checks ran.
     *
     * @return the verdicts
     */
    public static List<KernelVerdict> all() {
        synchronized (IN_ORDER) {
            return new ArrayList<>(IN_ORDER);
        }
    }

    /**
     * Returns the verdicts that found a defect (every outcome but verified).
     *
     * @return the verdicts that need attention
     */
    public static List<KernelVerdict> defects() {
        List<KernelVerdict> defects = new ArrayList<>();
        for (KernelVerdict verdict : all()) {
            if (verdict.isDefectFound()) {
                defects.add(verdict);
            }
        }
        return defects;
    }

    /**
     * Forgets every verdict, so that the next use of each signature checks its kernel again: for
     * tests, which compare kernels on purpose.
     */
    public static void forgetAll() {
        synchronized (IN_ORDER) {
            VERDICTS.clear();
            IN_ORDER.clear();
        }
        CanonicalKernels.forgetAll();
    }
}
