package io.github.djlamp.amp.diagnostics;

/** Arithmetic on the Tensor Core multiple. */
final class Alignment {

    private Alignment() {}

    static boolean isAligned(long value) {
        return value % AlignmentReport.MULTIPLE == 0;
    }

    /** The smallest multiple of 8 that is at least {@code value}. */
    static long roundUp(long value) {
        long multiple = AlignmentReport.MULTIPLE;
        return (value + multiple - 1) / multiple * multiple;
    }

    /** The smallest power of two that is at least {@code value}. */
    static long nextPowerOfTwo(long value) {
        long p = 1;
        while (p < value) {
            p <<= 1;
        }
        return p;
    }

    /**
     * {@code "100 -> 104"} or, when the next power of two differs, {@code "100 -> 104 (or 128)"}.
     */
    static String roundUpChoices(long value) {
        long up = roundUp(value);
        long pow = nextPowerOfTwo(value);
        return value + " -> " + up + (pow != up ? " (or " + pow + ")" : "");
    }
}
