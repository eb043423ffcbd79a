package io.github.djlamp.amp.doctor;

import java.util.Objects;

/**
 * What the {@link PlatformCheck} found for one case: a kernel (a layer, a precision, a memory
 * layout) run forward and backward in a child JVM and compared with a reference.
 */
public final class PlatformCase {

    /** What became of a case. */
    public enum Status {
        /** The kernel computed right: within its bound of the reference, every value. */
        OK,
        /** The kernel computed wrong: the detail says which result, how many values, how far. */
        WRONG,
        /** The kernel threw, or could not be compared: the detail says why. */
        FAILED,
        /** The JVM died while the case ran: the detail has the exit code or signal. */
        CRASHED,
        /** The case ran longer than the check's timeout; its JVM was killed. */
        TIMED_OUT,
        /** The case did not run: the check could not start its child JVM, or gave up. */
        NOT_RUN;

        /**
         * Returns whether this status is a defect of the platform.
         *
         * @return true for WRONG, FAILED, CRASHED and TIMED_OUT
         */
        public boolean isDefect() {
            return this != OK && this != NOT_RUN;
        }
    }

    private final String id;
    private final String description;
    private final Status status;
    private final String detail;

    /**
     * Creates a case's result.
     *
     * @param id a name without spaces, for example {@code
     *     bf16-channels-last/conv5x5-1to8-32x1x28x28}
     * @param description what the case computes, in one line
     * @param status what became of it
     * @param detail what was found, in one line (may be empty)
     */
    public PlatformCase(String id, String description, Status status, String detail) {
        this.id = Objects.requireNonNull(id, "id");
        this.description = Objects.requireNonNull(description, "description");
        this.status = Objects.requireNonNull(status, "status");
        this.detail = detail == null ? "" : detail;
    }

    /**
     * Returns the case's name, without spaces: precision, layout and layer.
     *
     * @return the id
     */
    public String getId() {
        return id;
    }

    /**
     * Returns what the case computes and against what reference.
     *
     * @return one line
     */
    public String getDescription() {
        return description;
    }

    /**
     * Returns what became of the case.
     *
     * @return the status
     */
    public Status getStatus() {
        return status;
    }

    /**
     * Returns what was found: how close a right kernel came, what a wrong one got wrong, why a case
     * failed, how its JVM died (exit code or signal, and the problematic frame of the JVM's error
     * file).
     *
     * @return one line
     */
    public String getDetail() {
        return detail;
    }

    /**
     * Returns whether this case found a defect of the platform.
     *
     * @return true when wrong, failed, crashed or timed out
     */
    public boolean isDefect() {
        return status.isDefect();
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return status + " " + description + (detail.isEmpty() ? "" : ": " + detail);
    }
}
