package io.github.djlamp.amp.distributed;

import java.time.Duration;

/**
 * How long one collective may wait for the other ranks, and what set it: {@link
 * DataParallelOptions.Builder#collectiveTimeout}, or else {@value #PROPERTY} read once when the
 * {@link World} was created (a system property, or the environment variable {@code
 * DJLAMP_MPI_TIMEOUT}), or else {@value #DEFAULT_SECONDS} s. The watchdog's messages name the
 * source, so that whoever reads them knows what to change.
 */
record CollectiveDeadline(Duration duration, String source) {

    /** The system property (or, upper-cased with dots as underscores, the environment variable). */
    static final String PROPERTY = "djlamp.mpi.timeout";

    /** The default deadline in seconds. */
    static final int DEFAULT_SECONDS = 300;

    /** Rank 0 aborts first; the other ranks give it this long to do so before they abort. */
    private static final Duration MAX_GRACE = Duration.ofSeconds(10);

    /**
     * Reads the deadline a world starts with from {@value #PROPERTY}, once.
     *
     * @throws IllegalArgumentException when it is set to something other than a positive number
     */
    static CollectiveDeadline configured() {
        String text = System.getProperty(PROPERTY);
        String source = "-D" + PROPERTY;
        if (text == null) {
            source = PROPERTY.toUpperCase().replace('.', '_');
            text = System.getenv(source);
        }
        if (text == null) {
            return new CollectiveDeadline(
                    Duration.ofSeconds(DEFAULT_SECONDS),
                    "the default; -D"
                            + PROPERTY
                            + " or DataParallelOptions.collectiveTimeout sets another");
        }
        try {
            double seconds = Double.parseDouble(text.trim());
            if (seconds > 0) {
                return new CollectiveDeadline(
                        Duration.ofMillis((long) (seconds * 1000)), source + "=" + text.trim());
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException(
                PROPERTY + " must be a positive number of seconds, got '" + text + "'");
    }

    long nanos() {
        return duration.toNanos();
    }

    /** How long a rank other than 0 waits past the deadline for rank 0 to end the job. */
    long graceNanos() {
        return Math.min(duration.toNanos(), MAX_GRACE.toNanos());
    }

    /** The deadline for messages: {@code 60 s (-Ddjlamp.mpi.timeout=60)}. */
    String describe() {
        return duration.toSeconds() + " s (" + source + ")";
    }
}
