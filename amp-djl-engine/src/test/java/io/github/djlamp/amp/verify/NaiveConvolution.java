package io.github.djlamp.amp.verify;

/**
 * A 2-D convolution (stride 1, dilation 1, one group) and its gradients summed directly in double
 * precision, through no kernel library: the reference that tells a platform's broken kernel from a
 * right one, independently of djl-amp's own check. Each result comes with the sums of the absolute
 * values of its products, which {@link ErrorBound} scales with.
 */
final class NaiveConvolution {

    final double[] output;
    final double[] outputAbs;
    final double[] inputGradient;
    final double[] inputGradientAbs;
    final double[] weightGradient;
    final double[] weightGradientAbs;
    final int[] outputShape;

    /**
     * Computes everything for one layer.
     *
     * @param x input (n, c, h, w)
     * @param xs its shape
     * @param w weight (f, c, k, k)
     * @param ws its shape
     * @param bias bias (f)
     * @param g the cotangent, of the output's shape
     * @param pad padding on each side
     */
    NaiveConvolution(float[] x, int[] xs, float[] w, int[] ws, float[] bias, float[] g, int pad) {
        int n = xs[0];
        int c = xs[1];
        int h = xs[2];
        int wd = xs[3];
        int f = ws[0];
        int k = ws[2];
        int oh = h + 2 * pad - k + 1;
        int ow = wd + 2 * pad - k + 1;
        outputShape = new int[] {n, f, oh, ow};
        output = new double[n * f * oh * ow];
        outputAbs = new double[output.length];
        inputGradient = new double[x.length];
        inputGradientAbs = new double[x.length];
        weightGradient = new double[w.length];
        weightGradientAbs = new double[w.length];
        for (int b = 0; b < n; b++) {
            for (int o = 0; o < f; o++) {
                for (int i = 0; i < oh; i++) {
                    for (int j = 0; j < ow; j++) {
                        int out = ((b * f + o) * oh + i) * ow + j;
                        double sum = bias[o];
                        double abs = Math.abs(bias[o]);
                        double cot = g[out];
                        for (int ch = 0; ch < c; ch++) {
                            for (int ki = 0; ki < k; ki++) {
                                int y = i - pad + ki;
                                if (y < 0 || y >= h) {
                                    continue;
                                }
                                for (int kj = 0; kj < k; kj++) {
                                    int z = j - pad + kj;
                                    if (z < 0 || z >= wd) {
                                        continue;
                                    }
                                    int in = ((b * c + ch) * h + y) * wd + z;
                                    int wi = ((o * c + ch) * k + ki) * k + kj;
                                    double product = (double) x[in] * w[wi];
                                    sum += product;
                                    abs += Math.abs(product);
                                    inputGradient[in] += cot * w[wi];
                                    inputGradientAbs[in] += Math.abs(cot * w[wi]);
                                    weightGradient[wi] += cot * x[in];
                                    weightGradientAbs[wi] += Math.abs(cot * x[in]);
                                }
                            }
                        }
                        output[out] = sum;
                        outputAbs[out] = abs;
                    }
                }
            }
        }
    }
}
