package io.github.djlamp.amp.it;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.verify.KernelVerdict;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;

/**
 * Whether the engine computes one convolution or linear layer right at one input shape, decided
 * without djl-amp's kernel verifier: the layer runs through the engine (its own {@code forward},
 * DJL's {@code GradientCollector}) in fp32 and in bf16 in each memory layout, and every output,
 * weight gradient, bias gradient and (where the layer's input needs one) input gradient is
 * compared, element by element, with a naive double-precision sum written here.
 *
 * <p>All sides see the same values, rounded to bf16 here first, so the products are exact and a
 * right kernel differs from the exact sum only by rounding: at most {@code u |y| <= u S} for the
 * bf16 result ({@code u = 2^-8}, S the sum of the absolute values of the products) and {@code K
 * 2^-24 S} for summing K products in fp32. A result counts as wrong beyond {@code (4u + 2 K 2^-24)
 * S} in bf16 and {@code (2^-9 + 2 K 2^-24) S} in fp32: four roundings of room, where the oneDNN
 * defect this looks for was off by up to 70% of the output's scale. Only the engine layer's cast (a
 * differentiable {@code torch.to}) is djl-amp's; the comparison and the bound are this class's.
 */
final class IndependentKernelCheck {

    private static final double BF16_UNIT = 0x1p-8;
    private static final double FP32_UNIT = 0x1p-24;

    /** What the check found for one layer at one input shape. */
    static final class Finding {
        final String path;
        final Shape input;
        final boolean inputGradient;

        /** The worst error over the tolerance in fp32, across every result compared. */
        final double fp32Worst;

        /** The same per bf16 layout checked, in the order given (the configured one first). */
        final Map<MemoryLayout, Double> bf16Worst;

        /** The fraction of results beyond the tolerance per bf16 layout. */
        final Map<MemoryLayout, Double> bf16WrongFraction;

        /** Which result was worst per bf16 layout. */
        final Map<MemoryLayout, String> bf16WorstWhere;

        Finding(
                String path,
                Shape input,
                boolean inputGradient,
                double fp32Worst,
                Map<MemoryLayout, Double> bf16Worst,
                Map<MemoryLayout, Double> bf16WrongFraction,
                Map<MemoryLayout, String> bf16WorstWhere) {
            this.path = path;
            this.input = input;
            this.inputGradient = inputGradient;
            this.fp32Worst = fp32Worst;
            this.bf16Worst = bf16Worst;
            this.bf16WrongFraction = bf16WrongFraction;
            this.bf16WorstWhere = bf16WorstWhere;
        }

        boolean fp32Right() {
            return fp32Worst <= 1;
        }

        boolean bf16Right(MemoryLayout layout) {
            return bf16Worst.get(layout) <= 1;
        }

        /** Whether the kernel a 16-bit run uses by default (the first layout) is wrong. */
        boolean defective() {
            return !fp32Right() || !bf16Right(bf16Worst.keySet().iterator().next());
        }

        /**
         * What a correct kernel check must decide: the configured layout when it is right, else the
         * first right one, else fp32; null where fp32 itself is wrong (the check can only say that
         * the platform is unsound, and whether its sampled fp32 reference notices depends on which
         * outputs it samples).
         */
        KernelVerdict.Outcome expected() {
            if (!fp32Right()) {
                return null;
            }
            boolean first = true;
            for (MemoryLayout layout : bf16Worst.keySet()) {
                if (bf16Right(layout)) {
                    return first
                            ? KernelVerdict.Outcome.VERIFIED
                            : KernelVerdict.Outcome.OTHER_LAYOUT;
                }
                first = false;
            }
            return KernelVerdict.Outcome.FP32_FALLBACK;
        }

        @Override
        public String toString() {
            StringBuilder sb =
                    new StringBuilder(
                            String.format(
                                    Locale.ROOT,
                                    "%s on %s%s: fp32 worst error %.3g of the bound",
                                    path,
                                    input,
                                    inputGradient ? " (with input gradient)" : "",
                                    fp32Worst));
            for (MemoryLayout layout : bf16Worst.keySet()) {
                sb.append(
                        String.format(
                                Locale.ROOT,
                                "; bf16 %s worst %.3g of the bound (%s), %.1f%% of results wrong",
                                layout == MemoryLayout.CHANNELS_LAST ? "channels-last" : "NCHW",
                                bf16Worst.get(layout),
                                bf16WorstWhere.get(layout),
                                100 * bf16WrongFraction.get(layout)));
            }
            return sb.toString();
        }
    }

    private IndependentKernelCheck() {}

    /**
     * Checks one layer of a model at one input shape with its own (trained) weights and inputs
     * drawn from a seeded generator.
     *
     * @param path the layer's path in the model
     * @param layer an initialized Conv2d (stride 1, no dilation, one group) or Linear
     * @param input the layer's input shape
     * @param inputGradient whether the layer's input needs a gradient (every layer but the stem)
     * @param layouts the bf16 memory layouts to try, the configured one first
     * @param manager where the check's arrays live (closed before this returns)
     * @return the finding
     */
    static Finding check(
            String path,
            Block layer,
            Shape input,
            boolean inputGradient,
            List<MemoryLayout> layouts,
            NDManager manager) {
        Parameter weight = null;
        Parameter bias = null;
        for (Pair<String, Parameter> p : layer.getDirectParameters()) {
            if (p.getValue().getType() == Parameter.Type.WEIGHT) {
                weight = p.getValue();
            } else if (p.getValue().getType() == Parameter.Type.BIAS) {
                bias = p.getValue();
            }
        }
        if (weight == null) {
            throw new IllegalArgumentException(path + " has no weight");
        }
        Shape weightShape = weight.getArray().getShape();
        Shape outputShape = layer.getOutputShapes(new Shape[] {input})[0];
        Random random = new Random(path.hashCode() * 31L + input.hashCode());
        float[] x = uniform(random, input.size(), -1f, 1f);
        float[] w = rounded(weight.getArray().toFloatArray());
        float[] b = bias == null ? null : rounded(bias.getArray().toFloatArray());
        float[] g = uniform(random, outputShape.size(), -1f, 1f);
        Exact exact;
        if (layer instanceof Conv2d) {
            exact = Exact.conv2d((Conv2d) layer, x, input, w, weightShape, b, g, outputShape);
        } else if (layer instanceof Linear) {
            exact = Exact.linear(x, input, w, weightShape, b, g, outputShape);
        } else {
            throw new IllegalArgumentException(path + " is neither Conv2d nor Linear: " + layer);
        }
        Leaves leaves = new Leaves(x, input, w, weightShape, b, g, outputShape, inputGradient);
        Map<String, float[]> fp32 = run(layer, weight, bias, leaves, null, manager);
        double fp32Worst = exact.compare(fp32, 0x1p-9).worst;
        Map<MemoryLayout, Double> worst = new LinkedHashMap<>();
        Map<MemoryLayout, Double> wrong = new LinkedHashMap<>();
        Map<MemoryLayout, String> where = new LinkedHashMap<>();
        for (MemoryLayout layout : layouts) {
            Map<String, float[]> low = run(layer, weight, bias, leaves, layout, manager);
            Comparison c = exact.compare(low, 4 * BF16_UNIT);
            worst.put(layout, c.worst);
            wrong.put(layout, c.wrongFraction);
            where.put(layout, c.worstWhere);
        }
        return new Finding(path, input, inputGradient, fp32Worst, worst, wrong, where);
    }

    /** The arrays one engine run starts from: bf16-representable floats. */
    private static final class Leaves {
        final float[] x;
        final Shape xShape;
        final float[] w;
        final Shape wShape;
        final float[] b;
        final float[] g;
        final Shape yShape;
        final boolean inputGradient;

        Leaves(
                float[] x,
                Shape xShape,
                float[] w,
                Shape wShape,
                float[] b,
                float[] g,
                Shape yShape,
                boolean inputGradient) {
            this.x = x;
            this.xShape = xShape;
            this.w = w;
            this.wShape = wShape;
            this.b = b;
            this.g = g;
            this.yShape = yShape;
            this.inputGradient = inputGradient;
        }
    }

    /**
     * Runs the layer through the engine, forward and backward from the cotangent: in fp32 when
     * {@code layout} is null, else with input, weight and bias cast to bf16 in that layout (as
     * djl-amp's wrapper casts them) and the output cast back to fp32.
     */
    private static Map<String, float[]> run(
            Block layer,
            Parameter weight,
            Parameter bias,
            Leaves leaves,
            MemoryLayout layout,
            NDManager manager) {
        try (NDManager m = manager.newSubManager()) {
            AmpBackend backend = AmpBackends.forManager(m);
            NDArray x = m.create(leaves.x, leaves.xShape);
            NDArray w = m.create(leaves.w, leaves.wShape);
            NDArray b = leaves.b == null ? null : m.create(leaves.b, new Shape(leaves.b.length));
            NDArray g = m.create(leaves.g, leaves.yShape);
            if (leaves.inputGradient) {
                x.setRequiresGradient(true);
            }
            w.setRequiresGradient(true);
            if (b != null) {
                b.setRequiresGradient(true);
            }
            Map<String, float[]> results = new LinkedHashMap<>();
            try (GradientCollector collector = Engine.getInstance().newGradientCollector()) {
                Map<Parameter, NDArray> values = new IdentityHashMap<>();
                values.put(weight, low(backend, w, layout, m));
                if (b != null) {
                    values.put(bias, low(backend, b, layout, m));
                }
                NDArray y =
                        layer.forward(
                                        new GivenArrays(m, values),
                                        new NDList(low(backend, x, layout, m)),
                                        true)
                                .singletonOrThrow();
                NDArray y32 =
                        layout == null
                                ? y
                                : backend.cast(y, Precision.FP32, MemoryLayout.CONTIGUOUS, m);
                collector.backward(y32.mul(g).sum());
                results.put("output", y32.toFloatArray());
            }
            results.put("weight gradient", w.getGradient().toFloatArray());
            if (b != null) {
                results.put("bias gradient", b.getGradient().toFloatArray());
            }
            if (leaves.inputGradient) {
                results.put("input gradient", x.getGradient().toFloatArray());
            }
            return results;
        }
    }

    private static NDArray low(AmpBackend backend, NDArray a, MemoryLayout layout, NDManager m) {
        return layout == null ? a : backend.cast(a, Precision.BF16, layout, m);
    }

    /** The exact results (double sums of the products) and the sums of their absolute values. */
    private static final class Exact {
        final Map<String, double[]> values = new LinkedHashMap<>();
        final Map<String, double[]> absolute = new LinkedHashMap<>();
        final Map<String, Long> reduction = new LinkedHashMap<>();

        static Exact conv2d(
                Conv2d conv,
                float[] x,
                Shape xs,
                float[] w,
                Shape ws,
                float[] b,
                float[] g,
                Shape ys) {
            Shape stride = conv.getStride();
            Shape dilation = conv.getDilation();
            if (conv.getGroups() != 1
                    || stride.get(0) != 1
                    || stride.get(1) != 1
                    || dilation.get(0) != 1
                    || dilation.get(1) != 1) {
                throw new IllegalArgumentException(
                        "the naive convolution here has stride 1, dilation 1, one group: " + conv);
            }
            int n = (int) xs.get(0);
            int c = (int) xs.get(1);
            int h = (int) xs.get(2);
            int wd = (int) xs.get(3);
            int f = (int) ws.get(0);
            int kh = (int) ws.get(2);
            int kw = (int) ws.get(3);
            int ph = (int) conv.getPadding().get(0);
            int pw = (int) conv.getPadding().get(1);
            int oh = (int) ys.get(2);
            int ow = (int) ys.get(3);
            double[] y = new double[n * f * oh * ow];
            double[] ya = new double[y.length];
            double[] dw = new double[w.length];
            double[] dwa = new double[w.length];
            double[] dx = new double[x.length];
            double[] dxa = new double[x.length];
            double[] db = new double[f];
            double[] dba = new double[f];
            for (int in = 0; in < n; in++) {
                for (int fo = 0; fo < f; fo++) {
                    for (int oy = 0; oy < oh; oy++) {
                        for (int ox = 0; ox < ow; ox++) {
                            int yi = ((in * f + fo) * oh + oy) * ow + ox;
                            double gy = g[yi];
                            double sum = b == null ? 0 : b[fo];
                            double abs = b == null ? 0 : Math.abs(b[fo]);
                            for (int ic = 0; ic < c; ic++) {
                                for (int ky = 0; ky < kh; ky++) {
                                    int iy = oy + ky - ph;
                                    if (iy < 0 || iy >= h) {
                                        continue;
                                    }
                                    for (int kx = 0; kx < kw; kx++) {
                                        int ix = ox + kx - pw;
                                        if (ix < 0 || ix >= wd) {
                                            continue;
                                        }
                                        int xi = ((in * c + ic) * h + iy) * wd + ix;
                                        int wi = ((fo * c + ic) * kh + ky) * kw + kx;
                                        double p = (double) x[xi] * w[wi];
                                        sum += p;
                                        abs += Math.abs(p);
                                        double pw2 = gy * x[xi];
                                        dw[wi] += pw2;
                                        dwa[wi] += Math.abs(pw2);
                                        double px = gy * w[wi];
                                        dx[xi] += px;
                                        dxa[xi] += Math.abs(px);
                                    }
                                }
                            }
                            y[yi] = sum;
                            ya[yi] = abs;
                            db[fo] += gy;
                            dba[fo] += Math.abs(gy);
                        }
                    }
                }
            }
            Exact e = new Exact();
            e.put("output", y, ya, (long) c * kh * kw + 1);
            e.put("weight gradient", dw, dwa, (long) n * oh * ow);
            if (b != null) {
                e.put("bias gradient", db, dba, (long) n * oh * ow);
            }
            e.put("input gradient", dx, dxa, (long) f * kh * kw);
            return e;
        }

        static Exact linear(
                float[] x, Shape xs, float[] w, Shape ws, float[] b, float[] g, Shape ys) {
            int n = (int) xs.get(0);
            int in = (int) (xs.size() / n);
            int out = (int) ws.get(0);
            double[] y = new double[n * out];
            double[] ya = new double[y.length];
            double[] dw = new double[w.length];
            double[] dwa = new double[w.length];
            double[] dx = new double[x.length];
            double[] dxa = new double[x.length];
            double[] db = new double[out];
            double[] dba = new double[out];
            for (int r = 0; r < n; r++) {
                for (int o = 0; o < out; o++) {
                    double gy = g[r * out + o];
                    double sum = b == null ? 0 : b[o];
                    double abs = b == null ? 0 : Math.abs(b[o]);
                    for (int i = 0; i < in; i++) {
                        double p = (double) x[r * in + i] * w[o * in + i];
                        sum += p;
                        abs += Math.abs(p);
                        double pw = gy * x[r * in + i];
                        dw[o * in + i] += pw;
                        dwa[o * in + i] += Math.abs(pw);
                        double px = gy * w[o * in + i];
                        dx[r * in + i] += px;
                        dxa[r * in + i] += Math.abs(px);
                    }
                    y[r * out + o] = sum;
                    ya[r * out + o] = abs;
                    db[o] += gy;
                    dba[o] += Math.abs(gy);
                }
            }
            Exact e = new Exact();
            e.put("output", y, ya, in + 1L);
            e.put("weight gradient", dw, dwa, n);
            if (b != null) {
                e.put("bias gradient", db, dba, n);
            }
            e.put("input gradient", dx, dxa, out);
            return e;
        }

        private void put(String name, double[] v, double[] a, long k) {
            values.put(name, v);
            absolute.put(name, a);
            reduction.put(name, k);
        }

        /**
         * Compares an engine run with the exact results: the error of each element over its
         * tolerance {@code (rounding + 2 K 2^-24) S + 2^-126}.
         */
        Comparison compare(Map<String, float[]> engine, double rounding) {
            Comparison c = new Comparison();
            long wrong = 0;
            long total = 0;
            for (Map.Entry<String, float[]> e : engine.entrySet()) {
                double[] exact = values.get(e.getKey());
                double[] abs = absolute.get(e.getKey());
                float[] actual = e.getValue();
                if (exact.length != actual.length) {
                    throw new IllegalStateException(
                            e.getKey() + ": " + actual.length + " results, " + exact.length);
                }
                double relative = rounding + 2.0 * reduction.get(e.getKey()) * FP32_UNIT;
                for (int i = 0; i < exact.length; i++) {
                    double tolerance = relative * abs[i] + 0x1p-126;
                    double ratio = Math.abs(actual[i] - exact[i]) / tolerance;
                    if (!(ratio <= 1)) {
                        wrong++;
                    }
                    if (!(ratio <= c.worst)) {
                        c.worst = Double.isNaN(ratio) ? Double.POSITIVE_INFINITY : ratio;
                        c.worstWhere =
                                String.format(
                                        Locale.ROOT,
                                        "%s[%d]: %.6g, exact %.6g",
                                        e.getKey(),
                                        i,
                                        actual[i],
                                        exact[i]);
                    }
                }
                total += exact.length;
            }
            c.wrongFraction = (double) wrong / total;
            return c;
        }
    }

    private static final class Comparison {
        double worst;
        String worstWhere = "";
        double wrongFraction;
    }

    /** A parameter store that hands a layer given arrays for its parameters. */
    private static final class GivenArrays extends ParameterStore {
        private final Map<Parameter, NDArray> values;

        GivenArrays(NDManager manager, Map<Parameter, NDArray> values) {
            super(manager, false);
            this.values = values;
        }

        @Override
        public NDArray getValue(Parameter parameter, Device device, boolean training) {
            return parameter == null ? null : values.get(parameter);
        }
    }

    /** Uniform values in [lo, hi), rounded to bf16. */
    private static float[] uniform(Random random, long size, float lo, float hi) {
        float[] v = new float[Math.toIntExact(size)];
        for (int i = 0; i < v.length; i++) {
            v[i] = bf16(lo + (hi - lo) * random.nextFloat());
        }
        return v;
    }

    private static float[] rounded(float[] values) {
        float[] r = new float[values.length];
        for (int i = 0; i < r.length; i++) {
            r[i] = bf16(values[i]);
        }
        return r;
    }

    /** Rounds to the nearest bfloat16 (ties to even), kept as a float. */
    static float bf16(float f) {
        if (Float.isNaN(f)) {
            return f;
        }
        int bits = Float.floatToRawIntBits(f);
        bits += 0x7FFF + ((bits >>> 16) & 1);
        return Float.intBitsToFloat(bits & 0xFFFF0000);
    }

    /** A layer djl-amp checks, with its path and its input shape at one batch size. */
    static final class Layer {
        final String path;
        final Block block;
        final Shape input;

        Layer(String path, Block block, Shape input) {
            this.path = path;
            this.block = block;
            this.input = input;
        }
    }

    /**
     * Lists the convolutions and linear layers among a sequential model's children, each with its
     * input shape for an input of {@code input}.
     *
     * @param model an initialized sequential model
     * @param input the model's input shape
     * @return the layers, in order
     */
    static List<Layer> checkedLayers(Block model, Shape input) {
        List<Layer> layers = new ArrayList<>();
        Shape shape = input;
        for (Pair<String, Block> child : model.getChildren()) {
            Block block = child.getValue();
            if (block instanceof Conv2d || block instanceof Linear) {
                layers.add(new Layer(child.getKey(), block, shape));
            }
            shape = block.getOutputShapes(new Shape[] {shape})[0];
        }
        return layers;
    }
}
