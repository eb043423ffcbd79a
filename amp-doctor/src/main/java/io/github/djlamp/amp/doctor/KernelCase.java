package io.github.djlamp.amp.doctor;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.spi.AmpBackend;

/**
 * One case the platform check's child JVM runs: a kernel computed and compared with a reference. A
 * case that computes wrong returns a {@link Result} saying so; one whose kernel kills the JVM never
 * returns, and the parent names it from the child's last {@code BEGIN} line.
 */
abstract class KernelCase {

    /** What a case's kernel did. */
    static final class Result {
        final PlatformCase.Status status;
        final String detail;

        private Result(PlatformCase.Status status, String detail) {
            this.status = status;
            this.detail = detail;
        }

        /** The kernel computed right. */
        static Result right(String detail) {
            return new Result(PlatformCase.Status.OK, detail);
        }

        /** The kernel computed wrong: what is wrong, and by how much. */
        static Result wrong(String finding) {
            return new Result(PlatformCase.Status.WRONG, finding);
        }

        /** The kernel could not be run or compared: why. */
        static Result failed(String reason) {
            return new Result(PlatformCase.Status.FAILED, reason);
        }
    }

    /** What a case runs on: the engine's manager on the device checked, and djl-amp's backend. */
    static final class Context {
        final NDManager manager;
        final Device device;
        final AmpBackend backend;

        Context(NDManager manager, Device device, AmpBackend backend) {
            this.manager = manager;
            this.device = device;
            this.backend = backend;
        }
    }

    private final String id;
    private final String description;

    KernelCase(String id, String description) {
        if (id.isEmpty() || id.chars().anyMatch(Character::isWhitespace)) {
            throw new IllegalArgumentException("a case id has no spaces: '" + id + "'");
        }
        this.id = id;
        this.description = description;
    }

    /** A name without spaces, unique in its suite. */
    final String id() {
        return id;
    }

    /** What the case computes and against what, in one line. */
    final String description() {
        return description;
    }

    /**
     * Runs the kernel and compares its results.
     *
     * @param context the engine and device
     * @return right or wrong, with what was found
     */
    abstract Result run(Context context);
}
