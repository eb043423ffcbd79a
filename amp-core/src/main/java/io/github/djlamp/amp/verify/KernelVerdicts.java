package io.github.djlamp.amp.verify;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * The verdicts of every kernel check this process has made, keyed by operation signature: a
 * signature is checked once, whichever layer of whichever model meets it first (ResNet's repeated
 * shapes are checked once).
 */
public final class KernelVerdicts {

    private static final Map<String, KernelVerdict> VERDICTS = new ConcurrentHashMap<>();
    private static final List<KernelVerdict> IN_ORDER = new ArrayList<>();

    private KernelVerdicts() {}

    /** The verdict of a signature already checked, or null. */
    static KernelVerdict get(String key) {
        return VERDICTS.get(key);
    }

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
