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
 *
 * <p>The accumulation term also applies to the tensor as a whole: {@code 2 K 2^-24 max(S)} is
 * allowed at every element. Transform-based algorithms (cuDNN's Winograd and FFT convolutions)
 * bound their error against the whole tensor's magnitude, not each element's own sum, so an element
 * whose products cancel (S near 0) may carry an error of the tensor's rounding: on an H100, correct
 * bf16 weight gradients of SqueezeNet's 3x3 convolutions were off by up to 2.5e-6 where S was near
 * 0, at a scale of 27. That floor stays far below a defect's error (a few millionths of the largest
 * S for the short reductions where the oneDNN defect lives).
 */
public final class ErrorBound {

    private static final double FP32_UNIT_ROUNDOFF = 0x1p-24;

    private final double relative;
    private final double absolute;
    private final double normwise;

    private ErrorBound(double relative, double absolute, double normwise) {
        this.relative = relative;
        this.absolute = absolute;
        this.normwise = normwise;
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
        double tiny = precision == Precision.BF16 ? 0x1p-126 : 0x1p-24;
        return sixteenBit(unitRoundoff(precision), tiny, reductionLength);
    }

    /**
     * The unit roundoff of a 16-bit format: 2^-8 for bf16, 2^-11 for fp16.
     *
     * @throws IllegalArgumentException for fp32, which has no 16-bit rounding to bound
     */
    static double unitRoundoff(Precision precision) {
        return switch (precision) {
            case BF16 -> 0x1p-8;
            case FP16 -> 0x1p-11;
            case FP32 ->
                    throw new IllegalArgumentException(
                            "ErrorBound bounds 16-bit kernels (bf16, fp16), not " + precision);
        };
    }

    /** A 16-bit result's rounding (four units) and an fp32 accumulation's, above the tiny floor. */
    private static ErrorBound sixteenBit(double unit, double tiny, long reductionLength) {
        double accumulation = 2.0 * Math.max(1, reductionLength) * FP32_UNIT_ROUNDOFF;
        return new ErrorBound(4 * unit + accumulation, tiny, accumulation);
    }

    /**
     * The bound of an fp32 result against an exact (double-precision) sum: fp32 or TF32
     * accumulation, with room for either.
     *
     * @param reductionLength how many products each result sums
     * @return the bound
     */
    public static ErrorBound fp32(long reductionLength) {
        return new ErrorBound(
                0x1p-9 + 2.0 * Math.max(1, reductionLength) * FP32_UNIT_ROUNDOFF, 0, 0);
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
     * Returns the factor of the tensor's largest S allowed at every element (the accumulation term,
     * for algorithms whose error is bounded against the whole tensor); 0 for the fp32 reference's
     * bound, which is checked against direct sums element by element.
     *
     * @return the norm-wise part of the bound
     */
    public double normwise() {
        return normwise;
    }

    /**
     * Returns the error allowed for a result whose absolute sum is {@code absoluteSum}, in a tensor
     * whose largest absolute sum is {@code largestAbsoluteSum}.
     *
     * @param absoluteSum S, the sum of the absolute values of the products
     * @param largestAbsoluteSum the largest S of the tensor
     * @return the tolerance
     */
    public double tolerance(double absoluteSum, double largestAbsoluteSum) {
        return relative * absoluteSum + absolute + normwise * largestAbsoluteSum;
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
