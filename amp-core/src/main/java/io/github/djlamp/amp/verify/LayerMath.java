package io.github.djlamp.amp.verify;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.convolutional.Convolution;
import io.github.djlamp.amp.spi.AmpBackend;

/** What the check needs to know of the layers it covers: reduction lengths and direct sums. */
final class LayerMath {

    private LayerMath() {}

    /**
     * Returns, for the output, the input gradient and each parameter's gradient (weight, then
     * bias), how many products each of their values sums.
     */
    static long[] reductionLengths(Block block, Shape input, Shape output, int parameterCount) {
        long[] lengths = new long[2 + parameterCount];
        if (block instanceof Convolution) {
            Convolution conv = (Convolution) block;
            long kernel = conv.getKernelShape().size();
            int groups = conv.getGroups();
            long outSpatial = output.size() / (output.get(0) * output.get(1));
            lengths[0] = input.get(1) / groups * kernel;
            lengths[1] = output.get(1) / groups * kernel;
            for (int i = 2; i < lengths.length; i++) {
                lengths[i] = output.get(0) * outSpatial;
            }
        } else {
            long in = input.get(input.dimension() - 1);
            long units = output.get(output.dimension() - 1);
            long rows = input.size() / in;
            lengths[0] = in;
            lengths[1] = units;
            for (int i = 2; i < lengths.length; i++) {
                lengths[i] = rows;
            }
        }
        return lengths;
    }

    /**
     * Compares a few outputs of the fp32 reference of the first sample (or row) with direct
     * double-precision sums.
     *
     * @param block the layer
     * @param inputs the fp32 input, weight and (if any) bias the reference ran on
     * @param output the fp32 reference output
     * @param backend reads the values on the host
     * @return what disagrees, or null when the reference is right
     */
    static String checkReference(Block block, NDList inputs, NDArray output, AmpBackend backend) {
        NDArray x = inputs.get(0);
        NDArray w = inputs.get(1);
        float[] bias = inputs.size() > 2 ? backend.readFloats(inputs.get(2)) : null;
        String mismatch;
        if (block instanceof Convolution) {
            Convolution conv = (Convolution) block;
            try (NDArray x0 = x.get(0);
                    NDArray y0 = output.get(0)) {
                mismatch =
                        DirectSum.convolution(
                                backend.readFloats(x0),
                                x0.getShape(),
                                backend.readFloats(w),
                                w.getShape(),
                                bias,
                                backend.readFloats(y0),
                                y0.getShape(),
                                conv.getStride(),
                                conv.getPadding(),
                                conv.getDilation(),
                                conv.getGroups());
            }
        } else {
            long in = x.getShape().get(x.getShape().dimension() - 1);
            long units = output.getShape().get(output.getShape().dimension() - 1);
            try (NDArray xRow = x.reshape(-1, in).get(0);
                    NDArray yRow = output.reshape(-1, units).get(0)) {
                mismatch =
                        DirectSum.linear(
                                backend.readFloats(xRow),
                                backend.readFloats(w),
                                bias,
                                backend.readFloats(yRow));
            }
        }
        return mismatch == null ? null : "the fp32 reference is wrong: " + mismatch;
    }
}
