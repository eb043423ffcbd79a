package io.github.djlamp.amp.pytorch;

import ai.djl.Device;
import ai.djl.pytorch.jni.JniUtils;
import com.sun.jna.Library;
import com.sun.jna.Native;

/**
 * Gives freed memory back to the system: glibc's {@code malloc_trim(0)} on the CPU (glibc keeps
 * freed chunks of the main arena, and with them the process's peak, until told), libtorch's {@code
 * emptyCache} on a GPU (the caching allocator keeps every block it reserved).
 */
final class FreedMemory {

    /** The one C function used: returns 1 when memory went back to the system. */
    interface GlibcMalloc extends Library {
        int malloc_trim(long pad);
    }

    private static final GlibcMalloc GLIBC = loadGlibc();

    private FreedMemory() {}

    private static GlibcMalloc loadGlibc() {
        try {
            return Native.load("c", GlibcMalloc.class);
        } catch (UnsatisfiedLinkError | RuntimeException e) {
            return null; // not glibc (musl, macOS, Windows): nothing to trim
        }
    }

    /** Gives back what the allocator of {@code device} keeps of freed memory. */
    static void release(Device device) {
        if (device.isGpu()) {
            JniUtils.emptyCudaCache();
            return;
        }
        if (GLIBC != null) {
            try {
                GLIBC.malloc_trim(0);
            } catch (UnsatisfiedLinkError e) {
                // a C library without malloc_trim: nothing to give back
            }
        }
    }
}
