package io.github.djlamp.amp.verify;

import ai.djl.ndarray.types.Shape;

/**
 * Direct double-precision sums of a few outputs of a convolution or a linear layer, through no
 * kernel library: what the fp32 reference itself is checked against, since on some platforms fp32
 * kernels are wrong too.
 */
final class DirectSum {

    /** How many outputs of the first sample are summed directly. */
    static final int SAMPLES = 16;

    private DirectSum() {}

    /**
     * Compares sampled outputs of one sample of a convolution with their direct sums.
     *
     * @param x the sample's input, shape (C, D1..Dk), row-major
     * @param xShape its shape
     * @param w the weight, shape (F, C / groups, K1..Kk)
     * @param wShape its shape
     * @param bias the bias (F), or null
     * @param y the reference output of that sample, shape (F, O1..Ok)
     * @param yShape its shape
     * @param stride the stride, one per spatial dimension
     * @param padding the padding, one per spatial dimension
     * @param dilation the dilation, one per spatial dimension
     * @param groups the number of groups
     * @return a description of the first output outside the fp32 bound, or null when all agree
     */
    static String convolution(
            float[] x,
            Shape xShape,
            float[] w,
            Shape wShape,
            float[] bias,
            float[] y,
            Shape yShape,
            Shape stride,
            Shape padding,
            Shape dilation,
            int groups) {
        int k = xShape.dimension() - 1;
        int filters = (int) wShape.get(0);
        int channelsPerGroup = (int) wShape.get(1);
        int filtersPerGroup = filters / groups;
        long[] in = trailing(xShape, k);
        long[] kernel = trailing(wShape, k);
        long[] out = trailing(yShape, k);
        long outPerFilter = product(out);
        long kernelSize = product(kernel);
        ErrorBound bound = ErrorBound.fp32(channelsPerGroup * kernelSize);
        for (long sample : sampleIndices(y.length)) {
            int f = (int) (sample / outPerFilter);
            long[] o = unravel(sample % outPerFilter, out);
            int firstChannel = (f / filtersPerGroup) * channelsPerGroup;
            double sum = bias == null ? 0 : bias[f];
            double absSum = bias == null ? 0 : Math.abs(bias[f]);
            for (int c = 0; c < channelsPerGroup; c++) {
                for (long kk = 0; kk < kernelSize; kk++) {
                    long[] j = unravel(kk, kernel);
                    long inOffset = 0;
                    boolean inside = true;
                    for (int d = 0; d < k && inside; d++) {
                        long pos = o[d] * stride.get(d) - padding.get(d) + j[d] * dilation.get(d);
                        inside = pos >= 0 && pos < in[d];
                        inOffset = inOffset * in[d] + pos;
                    }
                    if (!inside) {
                        continue;
                    }
                    double xv = x[(int) ((firstChannel + c) * product(in) + inOffset)];
                    double wv = w[(int) ((f * (long) channelsPerGroup + c) * kernelSize + kk)];
                    sum += xv * wv;
                    absSum += Math.abs(xv * wv);
                }
            }
            String mismatch = compare(y[(int) sample], sum, absSum, bound, sample, yShape);
            if (mismatch != null) {
                return mismatch;
            }
        }
        return null;
    }

    /**
     * Compares sampled outputs of one row of a linear layer with their direct sums.
     *
     * @param x the row's input (in)
     * @param w the weight, shape (units, in)
     * @param bias the bias (units), or null
     * @param y the reference output of that row (units)
     * @return a description of the first output outside the fp32 bound, or null when all agree
     */
    static String linear(float[] x, float[] w, float[] bias, float[] y) {
        int inputs = x.length;
        ErrorBound bound = ErrorBound.fp32(inputs);
        for (long sample : sampleIndices(y.length)) {
            int unit = (int) sample;
            double sum = bias == null ? 0 : bias[unit];
            double absSum = bias == null ? 0 : Math.abs(bias[unit]);
            for (int i = 0; i < inputs; i++) {
                double product = (double) x[i] * w[unit * inputs + i];
                sum += product;
                absSum += Math.abs(product);
            }
            String mismatch = compare(y[unit], sum, absSum, bound, sample, new Shape(y.length));
            if (mismatch != null) {
                return mismatch;
            }
        }
        return null;
    }

    private static String compare(
            float actual, double exact, double absSum, ErrorBound bound, long index, Shape shape) {
        if (!Double.isFinite(exact)) {
            // an operand rounded past fp16's range: that output judges no kernel
            return null;
        }
        double error = Math.abs(actual - exact);
        double tolerance = bound.tolerance(absSum);
        if (error <= tolerance) {
            return null;
        }
        return String.format(
                "fp32 output %d of %s is %s where the direct double-precision sum is %.6g"
                        + " (error %.3g, bound %.3g)",
                index, shape, actual, exact, error, tolerance);
    }

    static long[] sampleIndices(long size) {
        int count = (int) Math.min(SAMPLES, size);
        long[] indices = new long[count];
        for (int i = 0; i < count; i++) {
            indices[i] = count == 1 ? 0 : (i * (size - 1)) / (count - 1);
        }
        return indices;
    }

    private static long[] trailing(Shape shape, int count) {
        long[] dims = new long[count];
        int offset = shape.dimension() - count;
        for (int i = 0; i < count; i++) {
            dims[i] = shape.get(offset + i);
        }
        return dims;
    }

    private static long product(long[] dims) {
        long p = 1;
        for (long d : dims) {
            p *= d;
        }
        return p;
    }

    private static long[] unravel(long index, long[] dims) {
        long[] position = new long[dims.length];
        for (int d = dims.length - 1; d >= 0; d--) {
            position[d] = index % dims[d];
            index /= dims[d];
        }
        return position;
    }
}
