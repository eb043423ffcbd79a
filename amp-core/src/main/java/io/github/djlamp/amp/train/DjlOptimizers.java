package io.github.djlamp.amp.train;

import ai.djl.training.optimizer.Adam;
import ai.djl.training.optimizer.AdamW;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.optimizer.Sgd;
import io.github.djlamp.amp.internal.DjlSeam;

/**
 * DJL's optimizers as djl-amp reads and writes them: which of them it knows (the fused step and the
 * optimizer state file cover the same three) and their settings and state, which DJL keeps in
 * private fields with no getters: read and written through {@link DjlSeam}.
 */
final class DjlOptimizers {

    /** The optimizers djl-amp knows, with the code the optimizer state file stores. */
    enum Kind {
        SGD(1),
        ADAM(2),
        ADAMW(3);

        final int code;

        Kind(int code) {
            this.code = code;
        }

        /** Buffers per parameter: SGD's momentum (none without momentum), Adam's two moments. */
        int bufferCount(float momentum) {
            return this == SGD ? (momentum == 0f ? 0 : 1) : 2;
        }

        /** The kind of a code, or null for a code no kind has. */
        static Kind ofCode(int code) {
            for (Kind kind : values()) {
                if (kind.code == code) {
                    return kind;
                }
            }
            return null;
        }
    }

    private DjlOptimizers() {}

    /**
     * Returns the kind of DJL's optimizer.
     *
     * @param optimizer the optimizer
     * @return its kind, or null when it is not exactly DJL's Sgd, Adam or AdamW
     */
    static Kind kindOf(Optimizer optimizer) {
        Class<?> type = optimizer.getClass();
        if (type == Sgd.class) {
            return Kind.SGD;
        } else if (type == Adam.class) {
            return Kind.ADAM;
        } else if (type == AdamW.class) {
            return Kind.ADAMW;
        }
        return null;
    }

    /** Reads a private field the optimizer's own class declares. */
    static Object read(Optimizer optimizer, String name) {
        return read(optimizer, optimizer.getClass(), name);
    }

    /** Reads a private field that {@code owner} declares (one of those DjlSeam checks). */
    static Object read(Object target, Class<?> owner, String name) {
        return DjlSeam.read(target, owner, name);
    }

    /** Writes a private field that {@code owner} declares (one of those DjlSeam checks). */
    static void write(Object target, Class<?> owner, String name, Object value) {
        DjlSeam.write(target, owner, name, value);
    }
}
