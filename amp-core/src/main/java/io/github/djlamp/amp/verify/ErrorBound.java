package io.github.djlamp.amp.verify;

import io.github.djlamp.amp.policy.Precision;

/**
 * How far a correct 16-bit kernel may be from the fp32 reference, element by element.
 *
 * <p>Both sides see the same inputs, already rounded to the 16-bit format, so the products are
 * exact in fp32 and only two things separate a correct 16-bit kernel from the reference: rounding
 * its result to 16 bits (at most {@code u |y|}, {@code u} the format's unit roundoff: 2^-8 for
 * bf16, 2^-11 for fp16) and summing in a different order in fp32 (at most {@code K 2^-24 S} on each
 * side for a reduction of length K, Higham's bound). With {@code S} the sum of the absolute values
 * of the products (which bounds {@code |y|}), the tolerance is
 *
 * <pre>
 * tolerance = (4u + 2 K 2^-24) S + tiny
 * </pre>
 *
 * where four roundings instead of one leave room for kernels that round a partial sum to 16 bits
 * (cuBLAS's reduced-precision split-K in fp16) or compute the reference in TF32 (cuDNN's default
 * for fp32 on Ampere and later: 2^-10 S at most), and {@code tiny} is the format's smallest
 * subnormal step near zero (2^-24 for fp16, 2^-126 for bf16). A wrong kernel is far outside it: the
 * oneDNN defect that motivated the check is off by up to 70% of the output's scale, where the bound
 * allows 1.6% of S in bf16 and 0.2% in fp16.
 */
public final class ErrorBound {

    private static final double FP32_UNIT_ROUNDOFF = 0x1p-24;

    private final double relative;
    private final double absolute;

    private ErrorBound(double relative, double absolute) {
        this.relative = relative;
        this.absolute = absolute;
    }

    /**
     * The bound for a 16-bit result of a reduction of length {@code reductionLength}.
     *
     * @param precision the 16-bit precision of the kernel
     * @param reductionLength how many products each result sums
     * @return the bound
     * @throws IllegalArgumentException for fp32, which has no 16-bit rounding to bound
     */
    public static ErrorBound of(Precision precision, long reductionLength) {
        return switch (precision) {
            case BF16 -> sixteenBit(0x1p-8, 0x1p-126, reductionLength);
            case FP16 -> sixteenBit(0x1p-11, 0x1p-24, reductionLength);
            case FP32 ->
                    throw new IllegalArgumentException(
                            "ErrorBound bounds 16-bit kernels (bf16, fp16), not " + precision);
        };
    }

    /** A 16-bit result's rounding (four units) and an fp32 accumulation's, above the tiny floor. */
    private static ErrorBound sixteenBit(double unit, double tiny, long reductionLength) {
        double accumulation = 2.0 * Math.max(1, reductionLength) * FP32_UNIT_ROUNDOFF;
        return new ErrorBound(4 * unit + accumulation, tiny);
    }

    /**
     * The bound of an fp32 result against an exact (double-precision) sum: fp32 or TF32
     * accumulation, with room for either.
     *
     * @param reductionLength how many products each result sums
     * @return the bound
     */
    public static ErrorBound fp32(long reductionLength) {
        return new ErrorBound(0x1p-9 + 2.0 * Math.max(1, reductionLength) * FP32_UNIT_ROUNDOFF, 0);
    }

    /**
     * Returns the factor of the absolute sum S allowed.
     *
     * @return the relative part of the bound
     */
    public double relative() {
        return relative;
    }

    /**
     * Returns the error allowed where S is 0.
     *
     * @return the absolute part of the bound
     */
    public double absolute() {
        return absolute;
    }

    /**
     * Returns the error allowed for a result whose absolute sum is {@code absoluteSum}.
     *
     * @param absoluteSum S, the sum of the absolute values of the products
     * @return the tolerance
     */
    public double tolerance(double absoluteSum) {
        return relative * absoluteSum + absolute;
    }
}
