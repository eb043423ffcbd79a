package io.github.djlamp.amp.compile;

import java.util.List;

/**
 * One operation of a {@link ForwardGraph}, in the terms of DJL's PyTorch engine calls it stands
 * for. Values are numbered: 0 is the input, each operation writes the value {@code out}; parameters
 * are indices into {@link ForwardGraph#parameters()}.
 */
public sealed interface ForwardOp {

    /**
     * Returns the value this operation writes.
     *
     * @return its number
     */
    int out();

    /**
     * DJL's {@code Convolution}: {@code dims} spatial dimensions, {@code bias} -1 when the block
     * has none; {@code lowPrecision} when the plan runs it in the graph's 16-bit precision, {@code
     * channelsLast} when its 16-bit input and weight are cast channels-last.
     */
    record Convolution(
            int out,
            int in,
            int weight,
            int bias,
            int dims,
            long[] stride,
            long[] padding,
            long[] dilation,
            int groups,
            boolean lowPrecision,
            boolean channelsLast)
            implements ForwardOp {}

    /** DJL's {@code Linear}: bias -1 when it has none. */
    record Linear(int out, int in, int weight, int bias, boolean lowPrecision)
            implements ForwardOp {}

    /**
     * DJL's {@code BatchNorm} over {@code axis} (swapped with axis 1 around PyTorch's kernel, as
     * DJL's engine does), its running statistics updated in place in training; {@code
     * pytorchMomentum} is the share of the new batch, as DJL's engine passes it ({@code 1 -
     * momentum} computed in float).
     */
    record BatchNorm(
            int out,
            int in,
            int gamma,
            int beta,
            int runningMean,
            int runningVar,
            int axis,
            double pytorchMomentum,
            double epsilon)
            implements ForwardOp {}

    /**
     * DJL's {@code LayerNorm} over the trailing {@code normalizedShape}; {@code epsilon} as DJL's
     * engine passes it (a float widened).
     */
    record LayerNorm(int out, int in, int gamma, int beta, long[] normalizedShape, double epsilon)
            implements ForwardOp {}

    /** DJL's {@code Dropout}: {@code rate} as DJL's engine passes it (a float widened). */
    record Dropout(int out, int in, double rate) implements ForwardOp {}

    /**
     * DJL's {@code Pool.maxPool*dBlock} ({@code max}) or {@code Pool.avgPool*dBlock}: DJL's engine
     * counts padding in the average whatever the block asks.
     */
    record Pool(
            int out,
            int in,
            boolean max,
            int dims,
            long[] kernel,
            long[] stride,
            long[] padding,
            boolean ceil)
            implements ForwardOp {}

    /**
     * An elementwise function of DJL's {@code Activation}: "relu", "sigmoid", "tanh", "gelu", or
     * "relu6" (DJL's {@code minimum(6, relu(x))}).
     */
    record Pointwise(int out, int in, String function) implements ForwardOp {}

    /**
     * DJL's {@code Activation.leakyRelu}: {@code alpha} as DJL's engine passes it (a float
     * widened).
     */
    record LeakyRelu(int out, int in, double alpha) implements ForwardOp {}

    /** DJL's {@code reshape(long...)}, each size a number or another value's size along an axis. */
    record Reshape(int out, int in, List<Size> shape) implements ForwardOp {}

    /**
     * One size of a {@link Reshape}: a number, or the size of a value along an axis.
     *
     * @param number the number, where {@code value} is negative
     * @param value the value whose size it is, or -1
     * @param axis the axis of that value
     */
    record Size(long number, int value, int axis) {}

    /** DJL's {@code Blocks.batchFlatten}: every axis after the first into one. */
    record Flatten(int out, int in) implements ForwardOp {}

    /** DJL's {@code Pool.globalAvgPool*d}: the mean over the spatial axes, shape (N, C). */
    record GlobalAvgPool(int out, int in, int dims) implements ForwardOp {}

    /** ResNetV1's residual join: {@code relu(a + b)}, in fp32 where {@code fp32} says so. */
    record AddRelu(int out, int a, int b, boolean fp32) implements ForwardOp {}

    /**
     * DJL's {@code NDArrays.concat}: the values joined along {@code axis}, 16-bit where all are
     * (PyTorch's promotion).
     */
    record Concat(int out, List<Integer> in, int axis) implements ForwardOp {}

    /** The cast to fp32 an FP32 stage makes of its input (none where it is fp32 already). */
    record ToFp32(int out, int in) implements ForwardOp {}

    /**
     * DJL's attention heads: (B, S, E) reshaped to (B, S, N, H) and permuted to (B, N, S, H), a
     * view of its input.
     */
    record SplitHeads(int out, int in, long heads, long headSize) implements ForwardOp {}

    /** The heads joined again: (B, N, T, H) permuted to (B, T, N, H) and reshaped to (B, T, E). */
    record MergeHeads(int out, int in, long embedding) implements ForwardOp {}

    /** DJL's {@code transpose(axes)}: a permuted view. */
    record Permute(int out, int in, long[] axes) implements ForwardOp {}

    /** DJL's {@code matMul}, in the precision both operands have. */
    record MatMul(int out, int a, int b) implements ForwardOp {}

    /**
     * A product with a constant, as DJL's attention makes it: by a 0-dimensional fp32 array on the
     * input's device, so that a 16-bit input stays 16-bit.
     */
    record Scale(int out, int in, float factor) implements ForwardOp {}

    /** DJL's {@code softmax(axis)} of an fp32 array. */
    record Softmax(int out, int in, int axis) implements ForwardOp {}

    /**
     * DJL's {@code add}: 16-bit where both operands are, fp32 where either is (PyTorch's type
     * promotion).
     */
    record Add(int out, int a, int b) implements ForwardOp {}

    /**
     * The cast a 16-bit unit makes of its input: to the compute precision in {@code layout}; an
     * input already in it is left as it is unless {@code relayout}.
     */
    record UnitInput(int out, int in, GraphPlan.Layout layout, boolean relayout)
            implements ForwardOp {}

    /** The cast to the compute precision an operation's operand gets (none where it has it). */
    record ToLow(int out, int in) implements ForwardOp {}
}
