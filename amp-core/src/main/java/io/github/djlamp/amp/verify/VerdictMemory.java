package io.github.djlamp.amp.verify;

import java.util.Locale;

/**
 * Whether the verdicts of djl-amp's checks (each kernel's, and amp-doctor's platform check) are
 * kept on disk and reused by later JVMs on the same machine and libraries ({@link
 * RememberedVerdicts}).
 */
public enum VerdictMemory {
    /** Reuse a verdict kept for the same key; check and keep what is not kept yet. The default. */
    REMEMBER,
    /** Ignore what is kept: check every signature again, and keep the new verdicts. */
    RECHECK,
    /** Neither read nor write the disk: every JVM checks for itself. */
    OFF;

    /** The system property that sets the memory's default: remember, recheck or off. */
    public static final String PROPERTY = "djlamp.verdicts";

    /**
     * Reads a setting from its text form.
     *
     * @param value remember, recheck or off (any case)
     * @return the setting
     * @throws IllegalArgumentException naming the forms accepted
     */
    public static VerdictMemory parse(String value) {
        try {
            return valueOf(value.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException | NullPointerException e) {
            throw new IllegalArgumentException(
                    PROPERTY + " must be remember, recheck or off, got '" + value + "'", e);
        }
    }
}
