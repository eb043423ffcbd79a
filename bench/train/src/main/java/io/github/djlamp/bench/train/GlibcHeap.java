package io.github.djlamp.bench.train;

import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.Structure;

/**
 * The bytes this process holds from glibc's {@code malloc}, from {@code mallinfo2()} (glibc 2.33
 * and later): {@code uordblks} (in use in every arena) plus {@code hblkhd} (in mmapped chunks).
 * libtorch's CPU tensors come from {@code malloc}, the Java heap does not: this is the engine's
 * native memory in use, freed memory excluded, whatever glibc keeps cached or returns. {@code
 * bench/train/pytorch_resnet.py} reads the same counter through ctypes.
 */
public final class GlibcHeap {

    /** The method, as result files name it. */
    public static final String METHOD =
            "glibc mallinfo2(): uordblks + hblkhd, the bytes malloc has handed out and not taken"
                    + " back (arenas and mmapped chunks; the Java heap is not malloc's)";

    private static final LibC LIBC = load();

    private GlibcHeap() {}

    /**
     * Returns whether {@code mallinfo2} could be found (glibc 2.33 or later).
     *
     * @return true when {@link #inUseBytes()} works
     */
    public static boolean available() {
        return LIBC != null;
    }

    /**
     * Returns the bytes malloc has handed out and not taken back.
     *
     * @return {@code uordblks + hblkhd}
     * @throws IllegalStateException without glibc 2.33 or later
     */
    public static long inUseBytes() {
        if (LIBC == null) {
            throw new IllegalStateException(
                    "glibc's mallinfo2 was not found: the in-use counter needs glibc 2.33 or later");
        }
        Mallinfo2.ByValue info = LIBC.mallinfo2();
        return info.uordblks + info.hblkhd;
    }

    private static LibC load() {
        try {
            LibC libc = Native.load("c", LibC.class);
            libc.mallinfo2();
            return libc;
        } catch (UnsatisfiedLinkError | RuntimeException e) {
            return null;
        }
    }

    /** The part of the C library used here. */
    public interface LibC extends Library {
        /**
         * glibc's {@code struct mallinfo2 mallinfo2(void)}.
         *
         * @return the allocator's counters
         */
        Mallinfo2.ByValue mallinfo2();
    }

    /** glibc's {@code struct mallinfo2}: ten {@code size_t}s. */
    @Structure.FieldOrder({
        "arena",
        "ordblks",
        "smblks",
        "hblks",
        "hblkhd",
        "usmblks",
        "fsmblks",
        "uordblks",
        "fordblks",
        "keepcost"
    })
    public static class Mallinfo2 extends Structure {
        /** Non-mmapped space allocated (bytes). */
        public long arena;

        /** Number of free chunks. */
        public long ordblks;

        /** Number of free fastbin blocks. */
        public long smblks;

        /** Number of mmapped regions. */
        public long hblks;

        /** Space allocated in mmapped regions (bytes). */
        public long hblkhd;

        /** Unused. */
        public long usmblks;

        /** Space in freed fastbin blocks (bytes). */
        public long fsmblks;

        /** Total allocated space (bytes). */
        public long uordblks;

        /** Total free space (bytes). */
        public long fordblks;

        /** Top-most, releasable space (bytes). */
        public long keepcost;

        /** The structure returned by value. */
        public static class ByValue extends Mallinfo2 implements Structure.ByValue {}
    }
}
