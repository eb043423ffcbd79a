package io.github.djlamp.amp.pytorch;

import java.util.Arrays;

/** IEEE round-to-nearest-even references for fp16 and bf16, computed independently of PyTorch. */
final class Fp16Reference {

    private static final float[] FINITE_FP16 = finiteHalfValues();

    private Fp16Reference() {}

    static float decodeHalf(int bits) {
        int sign = (bits >> 15) & 1;
        int exponent = (bits >> 10) & 0x1f;
        int mantissa = bits & 0x3ff;
        float magnitude;
        if (exponent == 0) {
            magnitude = mantissa * (float) Math.pow(2, -24);
        } else if (exponent == 31) {
            magnitude = mantissa == 0 ? Float.POSITIVE_INFINITY : Float.NaN;
        } else {
            magnitude = (1 + mantissa / 1024f) * (float) Math.pow(2, exponent - 15);
        }
        return sign == 1 ? -magnitude : magnitude;
    }

    private static float[] finiteHalfValues() {
        float[] values = new float[31 * 1024];
        int n = 0;
        for (int bits = 0; bits < 0x7c00; bits++) {
            values[n++] = decodeHalf(bits);
        }
        return Arrays.copyOf(values, n);
    }

    /** fp32 -> fp16 -> fp32 with IEEE round-to-nearest, ties to even. */
    static float roundToHalf(float x) {
        if (Float.isNaN(x) || Float.isInfinite(x)) {
            return x;
        }
        float a = Math.abs(x);
        // 65520 is halfway between the largest half (65504) and 2^16, which rounds to infinity.
        if (a >= 65520f) {
            return Math.copySign(Float.POSITIVE_INFINITY, x);
        }
        int i = Arrays.binarySearch(FINITE_FP16, a);
        float r;
        if (i >= 0) {
            r = FINITE_FP16[i];
        } else if (-i - 1 == FINITE_FP16.length) {
            r = FINITE_FP16[FINITE_FP16.length - 1];
        } else {
            int hi = -i - 1;
            float up = FINITE_FP16[hi];
            float down = FINITE_FP16[hi - 1];
            double dUp = (double) up - a;
            double dDown = (double) a - down;
            if (dUp < dDown) {
                r = up;
            } else if (dDown < dUp) {
                r = down;
            } else {
                r = (hi % 2 == 0) ? up : down; // even mantissa: index parity equals bit parity
            }
        }
        return Math.copySign(r, x);
    }

    /** fp32 -> bf16 -> fp32 with IEEE round-to-nearest, ties to even. */
    static float roundToBfloat16(float x) {
        if (Float.isNaN(x)) {
            return x;
        }
        int bits = Float.floatToRawIntBits(x);
        int lsb = (bits >> 16) & 1;
        int rounded = bits + 0x7fff + lsb;
        return Float.intBitsToFloat(rounded & 0xffff0000);
    }
}
