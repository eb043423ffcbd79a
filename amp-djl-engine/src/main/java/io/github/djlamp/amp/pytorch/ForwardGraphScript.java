package io.github.djlamp.amp.pytorch;

import io.github.djlamp.amp.compile.ForwardGraph;
import io.github.djlamp.amp.compile.ForwardOp;
import io.github.djlamp.amp.compile.GraphPlan;
import io.github.djlamp.amp.policy.Precision;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * Writes a {@link ForwardGraph} as a TorchScript module whose methods run it, each operation the
 * ATen call DJL's PyTorch engine makes for it, so that fp32 results are bitwise DJL's. Operations
 * marked low-precision cast their input, weight and bias with differentiable {@code torch.to}
 * (gradients reach the fp32 masters in fp32); the output is cast back to fp32.
 */
final class ForwardGraphScript {

    static final String CLASS_NAME = "DjlAmpCompiledForward";

    /** PyTorch's MemoryFormat code of channels-last. */
    private static final int CHANNELS_LAST = 2;

    /** PyTorch's MemoryFormat code of contiguous. */
    private static final int CONTIGUOUS = 0;

    private ForwardGraphScript() {}

    static String source(ForwardGraph graph) {
        return String.join(
                "\n",
                "class " + CLASS_NAME + "(Module):",
                "  __parameters__ = []",
                "  __buffers__ = []",
                "  training : bool",
                method(graph, "forward", true),
                method(graph, "forward_inference", false),
                // DJL's engine calls libtorch's C++ functional linear, not aten::linear: for a
                // matrix with a bias both are addmm, but a 3-D input is a product and an added
                // bias there, flattened into addmm here, and the bias gradient sums in another
                // order (DJL's BERT). An explicit addmm would have the JIT differentiate it
                // itself, in yet another order.
                "  def linear_(self: __torch__."
                        + CLASS_NAME
                        + ", x: Tensor, w: Tensor, b: Optional[Tensor]) -> Tensor:",
                "    if b is None:",
                "      return torch.matmul(x, torch.t(w))",
                "    if x.dim() == 2:",
                "      return torch.linear(x, w, b)",
                "    return torch.add(torch.matmul(x, torch.t(w)), b)",
                "");
    }

    private static String method(ForwardGraph graph, String name, boolean training) {
        StringBuilder body = new StringBuilder();
        body.append("  def ")
                .append(name)
                .append("(self: __torch__.")
                .append(CLASS_NAME)
                .append(", x: Tensor");
        for (int input = 1; input < graph.inputs(); input++) {
            body.append(", ").append(value(input)).append(": Tensor");
        }
        body.append(", p: List[Tensor]) -> Tensor:\n");
        Precision low = graph.lowPrecision();
        Set<Integer> lowValues = new HashSet<>();
        if (graph.inputLow()) {
            lowValues.add(0);
        }
        for (ForwardOp op : graph.operations()) {
            body.append("    ").append(value(op.out())).append(" = ");
            body.append(expression(op, low, lowValues, training)).append('\n');
        }
        String out = value(graph.output());
        body.append("    return ")
                .append(
                        graph.fp32Output() && lowValues.contains(graph.output())
                                ? cast(out, Precision.FP32)
                                : out);
        return body.toString();
    }

    private static String expression(
            ForwardOp op, Precision low, Set<Integer> lowValues, boolean training) {
        if (op instanceof ForwardOp.Convolution c) {
            if (c.lowPrecision()) {
                lowValues.add(c.out());
            }
            // channels-last as the eager path casts them (AmpKernelScript's to_bf16_2)
            String in = operand(c.in(), c.lowPrecision(), low, lowValues);
            String weight = weight(c.weight(), c.lowPrecision(), low);
            if (c.channelsLast()) {
                in = lowValues.contains(c.in()) ? in : layout(in, low, CHANNELS_LAST);
                weight = layout(param(c.weight()), low, CHANNELS_LAST);
            }
            return "torch.conv"
                    + c.dims()
                    + "d("
                    + in
                    + ", "
                    + weight
                    + ", "
                    + bias(c.bias(), c.lowPrecision(), low)
                    + ", "
                    + list(c.stride())
                    + ", "
                    + list(c.padding())
                    + ", "
                    + list(c.dilation())
                    + ", "
                    + c.groups()
                    + ")";
        }
        if (op instanceof ForwardOp.Linear l) {
            if (l.lowPrecision()) {
                lowValues.add(l.out());
            }
            return "self.linear_("
                    + operand(l.in(), l.lowPrecision(), low, lowValues)
                    + ", "
                    + weight(l.weight(), l.lowPrecision(), low)
                    + ", "
                    + bias(l.bias(), l.lowPrecision(), low)
                    + ")";
        }
        if (op instanceof ForwardOp.BatchNorm b) {
            // fp32 statistics and affine on a 16-bit input, as the eager 16-bit path runs it
            inherit(b.out(), b.in(), lowValues);
            boolean swapped = b.axis() != 1;
            String swap = ", 1, " + b.axis() + ")";
            return (swapped ? "torch.transpose(" : "")
                    + "torch.batch_norm("
                    + (swapped ? "torch.transpose(" + value(b.in()) + swap : value(b.in()))
                    + ", "
                    + param(b.gamma())
                    + ", "
                    + param(b.beta())
                    + ", "
                    + param(b.runningMean())
                    + ", "
                    + param(b.runningVar())
                    + ", "
                    + (training ? "True" : "False")
                    + ", "
                    + number(b.pytorchMomentum())
                    + ", "
                    + number(b.epsilon())
                    + ", True)"
                    + (swapped ? swap : "");
        }
        if (op instanceof ForwardOp.LayerNorm n) {
            // an FP32 stage's cast of its input is a ToFp32 before it
            inherit(n.out(), n.in(), lowValues);
            return "torch.layer_norm("
                    + value(n.in())
                    + ", "
                    + list(n.normalizedShape())
                    + ", "
                    + param(n.gamma())
                    + ", "
                    + param(n.beta())
                    + ", "
                    + number(n.epsilon())
                    + ", True)";
        }
        if (op instanceof ForwardOp.Dropout d) {
            inherit(d.out(), d.in(), lowValues);
            return "torch.dropout("
                    + value(d.in())
                    + ", "
                    + number(d.rate())
                    + ", "
                    + (training ? "True" : "False")
                    + ")";
        }
        if (op instanceof ForwardOp.Pool p) {
            inherit(p.out(), p.in(), lowValues);
            String common =
                    value(p.in())
                            + ", "
                            + list(p.kernel())
                            + ", "
                            + list(p.stride())
                            + ", "
                            + list(p.padding());
            String ceil = p.ceil() ? "True" : "False";
            long[] dilation = new long[p.dims()];
            Arrays.fill(dilation, 1);
            return p.max()
                    ? "torch.max_pool"
                            + p.dims()
                            + "d("
                            + common
                            + ", "
                            + list(dilation)
                            + ", "
                            + ceil
                            + ")"
                    : "torch.avg_pool" + p.dims() + "d(" + common + ", " + ceil + ", True)";
        }
        if (op instanceof ForwardOp.Pointwise f) {
            inherit(f.out(), f.in(), lowValues);
            if (f.function().equals("relu6")) {
                // DJL's minimum(6, ...) with the Integer as an int32 0-dim array: a CPU one here,
                // which libtorch takes as a scalar on any device (no copy to the device per call)
                return "torch.minimum(torch.relu("
                        + value(f.in())
                        + "), torch.tensor(6, dtype=3))"; // 3: int32
            }
            return "torch." + f.function() + "(" + value(f.in()) + ")";
        }
        if (op instanceof ForwardOp.LeakyRelu l) {
            inherit(l.out(), l.in(), lowValues);
            // torch::nn::functional::leaky_relu, as DJL's engine calls it: aten::leaky_relu
            return "torch.leaky_relu(" + value(l.in()) + ", " + number(l.alpha()) + ")";
        }
        if (op instanceof ForwardOp.Reshape r) {
            inherit(r.out(), r.in(), lowValues);
            StringBuilder sizes = new StringBuilder();
            for (ForwardOp.Size size : r.shape()) {
                sizes.append(sizes.length() == 0 ? "" : ", ")
                        .append(
                                size.value() < 0
                                        ? String.valueOf(size.number())
                                        : value(size.value()) + ".size(" + size.axis() + ")");
            }
            return "torch.reshape(" + value(r.in()) + ", [" + sizes + "])";
        }
        if (op instanceof ForwardOp.Flatten f) {
            inherit(f.out(), f.in(), lowValues);
            String in = value(f.in());
            return "torch.reshape(" + in + ", [" + in + ".size(0), -1])";
        }
        if (op instanceof ForwardOp.GlobalAvgPool g) {
            inherit(g.out(), g.in(), lowValues);
            String in = value(g.in());
            long[] ones = new long[g.dims()];
            Arrays.fill(ones, 1);
            return "torch.reshape(torch.adaptive_avg_pool"
                    + g.dims()
                    + "d("
                    + in
                    + ", "
                    + list(ones)
                    + "), ["
                    + in
                    + ".size(0), "
                    + in
                    + ".size(1)])";
        }
        if (op instanceof ForwardOp.ToFp32 t) {
            return lowValues.contains(t.in()) ? cast(value(t.in()), Precision.FP32) : value(t.in());
        }
        if (op instanceof ForwardOp.AddRelu a) {
            boolean bothLow = !a.fp32() && lowValues.contains(a.a()) && lowValues.contains(a.b());
            if (bothLow) {
                lowValues.add(a.out());
            }
            return "torch.relu(torch.add("
                    + operand(a.a(), bothLow, low, lowValues)
                    + ", "
                    + operand(a.b(), bothLow, low, lowValues)
                    + "))";
        }
        String transformer = transformerExpression(op, low, lowValues);
        if (transformer != null) {
            return transformer;
        }
        throw new IllegalArgumentException("Unknown operation " + op);
    }

    /** The operations of DJL's attention and transformer encoder, or null for another. */
    private static String transformerExpression(
            ForwardOp op, Precision low, Set<Integer> lowValues) {
        if (op instanceof ForwardOp.SplitHeads h) {
            inherit(h.out(), h.in(), lowValues);
            String in = value(h.in());
            return "torch.permute(torch.reshape("
                    + in
                    + ", ["
                    + in
                    + ".size(0), "
                    + in
                    + ".size(1), "
                    + h.heads()
                    + ", "
                    + h.headSize()
                    + "]), [0, 2, 1, 3])";
        }
        if (op instanceof ForwardOp.MergeHeads m) {
            inherit(m.out(), m.in(), lowValues);
            String in = value(m.in());
            return "torch.reshape(torch.permute("
                    + in
                    + ", [0, 2, 1, 3]), ["
                    + in
                    + ".size(0), "
                    + in
                    + ".size(2), "
                    + m.embedding()
                    + "])";
        }
        if (op instanceof ForwardOp.Permute p) {
            inherit(p.out(), p.in(), lowValues);
            return "torch.permute(" + value(p.in()) + ", " + list(p.axes()) + ")";
        }
        if (op instanceof ForwardOp.MatMul m) {
            both(m.out(), m.a(), m.b(), lowValues);
            return "torch.matmul(" + value(m.a()) + ", " + value(m.b()) + ")";
        }
        if (op instanceof ForwardOp.Concat c) {
            if (lowValues.containsAll(c.in())) {
                lowValues.add(c.out());
            }
            return "torch.cat("
                    + c.in().stream()
                            .map(ForwardGraphScript::value)
                            .collect(Collectors.joining(", ", "[", "]"))
                    + ", "
                    + c.axis()
                    + ")";
        }
        if (op instanceof ForwardOp.Add a) {
            both(a.out(), a.a(), a.b(), lowValues);
            return "torch.add(" + value(a.a()) + ", " + value(a.b()) + ")";
        }
        if (op instanceof ForwardOp.Scale c) {
            // a 0-dimensional fp32 array beside the input, as DJL's attention multiplies by
            inherit(c.out(), c.in(), lowValues);
            String in = value(c.in());
            return "torch.mul("
                    + in
                    + ", torch.full(annotate(List[int], []), "
                    + number(c.factor())
                    + ", dtype="
                    + AmpKernelScript.FLOAT
                    + ", layout=None, device="
                    + in
                    + ".device, pin_memory=None))";
        }
        if (op instanceof ForwardOp.Softmax f) {
            return "torch.softmax("
                    + value(f.in())
                    + ", "
                    + f.axis()
                    + ", "
                    + AmpKernelScript.FLOAT
                    + ")";
        }
        if (op instanceof ForwardOp.UnitInput u) {
            boolean isLow = lowValues.contains(u.in());
            lowValues.add(u.out());
            return isLow && !u.relayout()
                    ? value(u.in())
                    : unitCast(value(u.in()), low, u.layout());
        }
        if (op instanceof ForwardOp.ToLow t) {
            boolean isLow = lowValues.contains(t.in());
            lowValues.add(t.out());
            return isLow ? value(t.in()) : cast(value(t.in()), low);
        }
        return null;
    }

    /** An operation whose result is 16-bit where both operands are (PyTorch's promotion). */
    private static void both(int out, int a, int b, Set<Integer> lowValues) {
        if (lowValues.contains(a) && lowValues.contains(b)) {
            lowValues.add(out);
        }
    }

    private static void inherit(int out, int in, Set<Integer> lowValues) {
        if (lowValues.contains(in)) {
            lowValues.add(out);
        }
    }

    /** A value in the precision the operation computes in: cast where it is not already. */
    private static String operand(
            int value, boolean lowOperation, Precision low, Set<Integer> lowValues) {
        boolean isLow = lowValues.contains(value);
        if (lowOperation == isLow) {
            return value(value);
        }
        return cast(value(value), lowOperation ? low : Precision.FP32);
    }

    private static String weight(int parameter, boolean lowOperation, Precision low) {
        return lowOperation ? cast(param(parameter), low) : param(parameter);
    }

    private static String bias(int parameter, boolean lowOperation, Precision low) {
        return parameter < 0 ? "None" : weight(parameter, lowOperation, low);
    }

    private static String layout(String expression, Precision precision, int format) {
        String cast = expression;
        if (cast.startsWith("torch.to(") && cast.endsWith(")")) {
            cast = cast.substring("torch.to(".length(), cast.lastIndexOf(','));
        }
        return "torch.to("
                + cast
                + ", "
                + AmpKernelScript.dtypeCode(precision)
                + ", False, False, "
                + format
                + ")";
    }

    /** A unit's input cast as its stage casts it ({@code PtAmpBackend.cast}). */
    private static String unitCast(String expression, Precision low, GraphPlan.Layout layout) {
        String format =
                switch (layout) {
                    case AS_IT_IS -> "1";
                    case CONTIGUOUS -> String.valueOf(CONTIGUOUS);
                    case CHANNELS_LAST ->
                            CHANNELS_LAST + " if " + expression + ".dim() == 4 else 1";
                };
        return "torch.to("
                + expression
                + ", "
                + AmpKernelScript.dtypeCode(low)
                + ", False, False, "
                + format
                + ")";
    }

    /** A cast as the eager stages make it: to fp32 contiguous, to 16 bits in the layout it has. */
    private static String cast(String expression, Precision precision) {
        return "torch.to("
                + expression
                + ", "
                + AmpKernelScript.dtypeCode(precision)
                + (precision == Precision.FP32 ? ", False, False, " + CONTIGUOUS : "")
                + ")";
    }

    private static String value(int value) {
        return value == 0 ? "x" : "v" + value;
    }

    private static String param(int index) {
        return "p[" + index + "]";
    }

    private static String list(long[] values) {
        return Arrays.stream(values)
                .mapToObj(Long::toString)
                .collect(Collectors.joining(", ", "[", "]"));
    }

    /** A double as TorchScript reads it back exactly. */
    private static String number(double value) {
        return Double.toString(value).replace('E', 'e');
    }
}
