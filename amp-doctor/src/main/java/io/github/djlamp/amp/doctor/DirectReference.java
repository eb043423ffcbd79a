package io.github.djlamp.amp.doctor;

import io.github.djlamp.amp.verify.ErrorBound;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A layer's forward and backward computed directly in double precision on the host, through no
 * kernel library: the output, the input gradient, the weight gradient and the bias gradient, each
 * with the sums S of the absolute values of its products that {@link ErrorBound#fp32(long)} scales
 * with. What the fp32 kernels of the engine are compared with, every value of every result.
 */
final class DirectReference {

    /** One result of the reference: its exact values, their absolute sums and reduction length. */
    static final class Result {
        final String name;
        final double[] exact;
        final double[] absoluteSums;
        final long reduction;

        Result(String name, int size, long reduction) {
            this.name = name;
            this.exact = new double[size];
            this.absoluteSums = new double[size];
            this.reduction = reduction;
        }
    }

    /** How one result of a kernel compares with the reference. */
    static final class Agreement {
        /** What is wrong, or null when every value is within its bound. */
        final String failure;

        /** The largest error as a fraction of its bound (below 1 when right). */
        final double worstRatio;

        Agreement(String failure, double worstRatio) {
            this.failure = failure;
            this.worstRatio = worstRatio;
        }
    }

    private DirectReference() {}

    /**
     * The forward and backward of a 2-D convolution (NCHW, stride 1, no dilation, one group) from
     * the cotangent {@code g} of its output.
     *
     * @return output, input gradient, weight gradient, bias gradient
     */
    static List<Result> convolution(LayerSpec layer, float[] x, float[] w, float[] b, float[] g) {
        int n = (int) layer.input().get(0);
        int c = (int) layer.input().get(1);
        int h = (int) layer.input().get(2);
        int wd = (int) layer.input().get(3);
        int f = layer.outputs();
        int k = layer.kernel();
        int p = layer.pad();
        int oh = (int) layer.outputShape().get(2);
        int ow = (int) layer.outputShape().get(3);
        Result y = new Result("output", n * f * oh * ow, (long) c * k * k + 1);
        Result dx = new Result("input gradient", x.length, (long) f * k * k);
        Result dw = new Result("weight gradient", w.length, (long) n * oh * ow);
        Result db = new Result("bias gradient", f, (long) n * oh * ow);
        // innermost over a row of the output: contiguous in x, g, y and the input gradient
        for (int in = 0; in < n; in++) {
            for (int fi = 0; fi < f; fi++) {
                int outBase = (in * f + fi) * oh * ow;
                for (int o = outBase; o < outBase + oh * ow; o++) {
                    y.exact[o] = b[fi];
                    y.absoluteSums[o] = Math.abs(b[fi]);
                    db.exact[fi] += g[o];
                    db.absoluteSums[fi] += Math.abs(g[o]);
                }
                for (int ci = 0; ci < c; ci++) {
                    int xBase = (in * c + ci) * h * wd;
                    for (int ki = 0; ki < k; ki++) {
                        for (int kj = 0; kj < k; kj++) {
                            int wIndex = ((fi * c + ci) * k + ki) * k + kj;
                            double wv = w[wIndex];
                            double weight = 0;
                            double weightAbs = 0;
                            int jFrom = Math.max(0, p - kj);
                            int jTo = Math.min(ow, wd + p - kj);
                            for (int i = Math.max(0, p - ki); i < Math.min(oh, h + p - ki); i++) {
                                int xRow = xBase + (i + ki - p) * wd + kj - p;
                                int outRow = outBase + i * ow;
                                for (int j = jFrom; j < jTo; j++) {
                                    double xv = x[xRow + j];
                                    double gv = g[outRow + j];
                                    double product = xv * wv;
                                    y.exact[outRow + j] += product;
                                    y.absoluteSums[outRow + j] += Math.abs(product);
                                    double back = gv * wv;
                                    dx.exact[xRow + j] += back;
                                    dx.absoluteSums[xRow + j] += Math.abs(back);
                                    weight += gv * xv;
                                    weightAbs += Math.abs(gv * xv);
                                }
                            }
                            dw.exact[wIndex] += weight;
                            dw.absoluteSums[wIndex] += weightAbs;
                        }
                    }
                }
            }
        }
        return List.of(y, dx, dw, db);
    }

    /**
     * The forward and backward of a linear layer {@code y = x w^T + b} on rows of {@code x}, from
     * the cotangent {@code g} of its output.
     *
     * @return output, input gradient, weight gradient, bias gradient
     */
    static List<Result> linear(LayerSpec layer, float[] x, float[] w, float[] b, float[] g) {
        int features = layer.inputs();
        int units = layer.outputs();
        int rows = x.length / features;
        Result y = new Result("output", rows * units, features + 1L);
        Result dx = new Result("input gradient", x.length, units);
        Result dw = new Result("weight gradient", w.length, rows);
        Result db = new Result("bias gradient", units, rows);
        for (int r = 0; r < rows; r++) {
            for (int u = 0; u < units; u++) {
                double gv = g[r * units + u];
                double sum = b[u];
                double abs = Math.abs(b[u]);
                db.exact[u] += gv;
                db.absoluteSums[u] += Math.abs(gv);
                for (int i = 0; i < features; i++) {
                    double xv = x[r * features + i];
                    double wv = w[u * features + i];
                    double product = xv * wv;
                    sum += product;
                    abs += Math.abs(product);
                    dx.exact[r * features + i] += gv * wv;
                    dx.absoluteSums[r * features + i] += Math.abs(gv * wv);
                    dw.exact[u * features + i] += gv * xv;
                    dw.absoluteSums[u * features + i] += Math.abs(gv * xv);
                }
                y.exact[r * units + u] = sum;
                y.absoluteSums[r * units + u] = abs;
            }
        }
        return List.of(y, dx, dw, db);
    }

    /**
     * Compares a kernel's fp32 result with the reference, every value within {@link
     * ErrorBound#fp32(long)} of its exact sum.
     *
     * @param reference the reference result
     * @param actual the kernel's values, in the same (row-major) order
     * @return the agreement: a failure naming the result, how many values are wrong and by how
     *     much, or null
     */
    static Agreement compare(Result reference, float[] actual) {
        if (actual.length != reference.exact.length) {
            return new Agreement(
                    reference.name
                            + " has "
                            + actual.length
                            + " values where "
                            + reference.exact.length
                            + " were expected",
                    Double.POSITIVE_INFINITY);
        }
        ErrorBound bound = ErrorBound.fp32(reference.reduction);
        long wrong = 0;
        double worst = 0;
        double worstRatio = 0;
        double scale = 0;
        for (int i = 0; i < actual.length; i++) {
            double error = Math.abs(actual[i] - reference.exact[i]);
            double tolerance = bound.tolerance(reference.absoluteSums[i]);
            scale = Math.max(scale, Math.abs(reference.exact[i]));
            if (!(error <= tolerance)) {
                wrong++;
                worst = Double.isNaN(error) ? Double.NaN : Math.max(worst, error);
                worstRatio = Double.POSITIVE_INFINITY;
            } else if (tolerance > 0) {
                worstRatio = Math.max(worstRatio, error / tolerance);
            }
        }
        if (wrong == 0) {
            return new Agreement(null, worstRatio);
        }
        return new Agreement(
                String.format(
                        Locale.ROOT,
                        "%s: %d of %d values wrong (%.1f%%), off by up to %.3g at a scale of"
                                + " %.3g (bound %.2g S against double-precision sums)",
                        reference.name,
                        wrong,
                        actual.length,
                        100.0 * wrong / actual.length,
                        worst,
                        scale,
                        bound.relative()),
                worstRatio);
    }

    /** Compares each of a kernel's results with the reference's, in order. */
    static List<Agreement> compareAll(List<Result> references, List<float[]> actual) {
        List<Agreement> agreements = new ArrayList<>();
        for (int i = 0; i < references.size(); i++) {
            agreements.add(compare(references.get(i), actual.get(i)));
        }
        return agreements;
    }
}
