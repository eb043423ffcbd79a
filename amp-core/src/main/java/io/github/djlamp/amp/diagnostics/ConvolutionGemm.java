package io.github.djlamp.amp.diagnostics;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.nn.convolutional.Convolution;

/**
 * The implicit GEMM of a {@link Convolution} (Conv1d, Conv2d, Conv3d), as cuDNN computes it: M =
 * batch x output positions, N = filters, K = input channels per group x kernel volume. The output
 * size follows DJL's own formula: {@code (in + 2 * padding - dilation * (kernel - 1) - 1) / stride
 * + 1} per spatial dimension.
 */
final class ConvolutionGemm {

    private static final String[] LAYOUTS = {"(N, C, W)", "(N, C, H, W)", "(N, C, D, H, W)"};

    private ConvolutionGemm() {}

    static LayerGemm of(Convolution conv, String path, Shape[] inputs) {
        String layer = LayerNames.describe(path, conv);
        Shape kernel = conv.getKernelShape();
        int spatial = kernel.dimension();
        int rank = spatial + 2;
        String layout = spatial >= 1 && spatial <= LAYOUTS.length ? LAYOUTS[spatial - 1] : "";
        if (inputs.length != 1) {
            throw new IllegalArgumentException(
                    layer
                            + " takes one input but receives "
                            + inputs.length
                            + " shapes "
                            + LayerNames.shapes(inputs)
                            + ": give the report the shapes the model's forward receives");
        }
        Shape input = inputs[0];
        if (input.dimension() != rank) {
            throw new IllegalArgumentException(
                    layer
                            + " needs a "
                            + rank
                            + "-d input "
                            + layout
                            + " but receives "
                            + input
                            + " of rank "
                            + input.dimension()
                            + (input.dimension() == rank - 1
                                    ? ": the batch dimension is missing; give each input shape"
                                            + " with its batch size first, e.g. "
                                            + new Shape(64).addAll(input)
                                    : ": give each input shape as " + layout + ", batch first"));
        }
        long batch = input.get(0);
        long channels = input.get(1);
        int groups = conv.getGroups();
        long filters = conv.getFilters();
        if (groups < 1 || channels % groups != 0 || filters % groups != 0) {
            throw new IllegalArgumentException(
                    layer
                            + " has "
                            + groups
                            + " groups, which must divide both its "
                            + channels
                            + " input channels and its "
                            + filters
                            + " filters: check the channel dimension (index 1) of the input"
                            + " shape "
                            + input);
        }
        long positions = 1;
        long kernelVolume = 1;
        for (int i = 0; i < spatial; i++) {
            long extent =
                    input.get(2 + i)
                            + 2 * conv.getPadding().get(i)
                            - conv.getDilation().get(i) * (kernel.get(i) - 1)
                            - 1;
            if (extent < 0) {
                throw new IllegalArgumentException(
                        layer
                                + " receives "
                                + input
                                + ", too small for its kernel "
                                + kernel
                                + " with padding "
                                + conv.getPadding()
                                + " and dilation "
                                + conv.getDilation()
                                + " in spatial dimension "
                                + i
                                + ": give a larger input shape");
            }
            positions *= extent / conv.getStride().get(i) + 1;
            kernelVolume *= kernel.get(i);
        }
        checkInitializedFor(conv, layer, input, channels / groups);
        GemmShape gemm =
                new GemmShape(
                        Math.multiplyExact(batch, positions),
                        filters,
                        Math.multiplyExact(channels / groups, kernelVolume));
        return LayerGemm.convolution(gemm, channels, filters, groups, rank);
    }

    private static void checkInitializedFor(
            Convolution conv, String layer, Shape input, long channelsPerGroup) {
        Parameter weight = conv.getDirectParameters().get("weight");
        Shape weightShape = weight == null ? null : weight.getShape();
        if (weightShape != null
                && weightShape.dimension() >= 2
                && weightShape.get(1) != channelsPerGroup) {
            throw new IllegalArgumentException(
                    layer
                            + " was initialized for "
                            + weightShape.get(1) * conv.getGroups()
                            + " input channels, but the input shapes give it "
                            + input.get(1)
                            + " (its input "
                            + input
                            + "): give the report the shapes the model was initialized with (the"
                            + " batch size may differ)");
        }
    }
}
