package io.github.djlamp.amp.doctor;

import com.sun.jna.Function;
import com.sun.jna.NativeLibrary;

/**
 * glibc's {@code malloc_trim(0)}, through JNA (which DJL's API already depends on): returns the
 * native heap's free pages to the system. Engines such as PyTorch allocate tensors with {@code
 * malloc}, and glibc keeps freed memory resident for reuse, so without it the resident set after a
 * run still holds that run's memory.
 */
final class NativeHeap {

    private static final Function MALLOC_TRIM = find();

    private NativeHeap() {}

    /** Returns whether {@link #trim()} can do anything here. */
    static boolean isTrimmable() {
        return MALLOC_TRIM != null;
    }

    /** Trims the native heap; does nothing where glibc's {@code malloc_trim} is missing. */
    static void trim() {
        if (MALLOC_TRIM != null) {
            try {
                MALLOC_TRIM.invokeInt(new Object[] {0});
            } catch (RuntimeException | LinkageError e) {
                // nothing to release through this path: the measurement says so in its method
            }
        }
    }

    private static Function find() {
        if (!System.getProperty("os.name", "").startsWith("Linux")) {
            return null;
        }
        try {
            return NativeLibrary.getInstance("c").getFunction("malloc_trim");
        } catch (RuntimeException | LinkageError e) {
            return null;
        }
    }
}
