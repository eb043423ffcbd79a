package io.github.djlamp.amp.doctor;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;

/**
 * One layer the platform check runs: a 2-D convolution (stride 1, square kernel, equal padding) or
 * a linear layer, with its input shape. Named as {@link
 * io.github.djlamp.amp.verify.CanonicalKernels#describe()} names its layers.
 */
final class LayerSpec {

    private final boolean convolution;
    private final int outputs;
    private final int kernel;
    private final int pad;
    private final Shape input;

    private LayerSpec(boolean convolution, int outputs, int kernel, int pad, Shape input) {
        this.convolution = convolution;
        this.outputs = outputs;
        this.kernel = kernel;
        this.pad = pad;
        this.input = input;
    }

    /** A convolution of {@code filters} square {@code kernel}s, padded by {@code pad}. */
    static LayerSpec conv(int filters, int kernel, int pad, long... input) {
        return new LayerSpec(true, filters, kernel, pad, new Shape(input));
    }

    /** A linear layer of {@code units} outputs on rows of the input's last dimension. */
    static LayerSpec linear(int units, long... input) {
        return new LayerSpec(false, units, 0, 0, new Shape(input));
    }

    boolean isConvolution() {
        return convolution;
    }

    /** Filters of a convolution, units of a linear layer. */
    int outputs() {
        return outputs;
    }

    int kernel() {
        return kernel;
    }

    int pad() {
        return pad;
    }

    Shape input() {
        return input;
    }

    /** Input channels of a convolution, features of a linear layer. */
    int inputs() {
        return (int) (convolution ? input.get(1) : input.get(input.dimension() - 1));
    }

    Shape weightShape() {
        return convolution
                ? new Shape(outputs, inputs(), kernel, kernel)
                : new Shape(outputs, inputs());
    }

    Shape outputShape() {
        if (convolution) {
            long height = input.get(2) + 2L * pad - kernel + 1;
            long width = input.get(3) + 2L * pad - kernel + 1;
            return new Shape(input.get(0), outputs, height, width);
        }
        return new Shape(input.get(0), outputs);
    }

    /** A new DJL block of this layer, uninitialized. */
    Block newBlock() {
        if (convolution) {
            return Conv2d.builder()
                    .setFilters(outputs)
                    .setKernelShape(new Shape(kernel, kernel))
                    .optPadding(new Shape(pad, pad))
                    .build();
        }
        return Linear.builder().setUnits(outputs).build();
    }

    /** For example {@code conv 5x5, 1 -> 8 channels}. */
    String name() {
        return convolution
                ? "conv " + kernel + "x" + kernel + ", " + inputs() + " -> " + outputs + " channels"
                : "linear " + inputs() + " -> " + outputs;
    }

    /** For example {@code conv 5x5, 1 -> 8 channels on (32, 1, 28, 28)}. */
    String describe() {
        return name() + " on " + input;
    }

    /** For an identifier without spaces, for example {@code conv5x5-1to8-32x1x28x28}. */
    String slug() {
        StringBuilder sb =
                new StringBuilder(convolution ? "conv" + kernel + "x" + kernel : "linear");
        sb.append('-').append(inputs()).append("to").append(outputs).append('-');
        for (int i = 0; i < input.dimension(); i++) {
            sb.append(i == 0 ? "" : "x").append(input.get(i));
        }
        return sb.toString();
    }
}
