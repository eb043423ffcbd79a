package io.github.djlamp.amp.verify;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.pytorch.GcSafe;
import io.github.djlamp.amp.spi.AmpBackends;

/**
 * A test double of a broken platform: a Conv2d whose kernel is wrong in 16 bits (every output off
 * by half its magnitude, forward and backward), or wrong in fp32 only, as oneDNN's were on some
 * machines. It is a {@code Convolution}, so djl-amp checks it like DJL's own.
 */
public final class WrongLowPrecisionConv2d extends Conv2d {

    private final boolean wrongInFp32;
    private final boolean lastRowOnly;

    private WrongLowPrecisionConv2d(
            Conv2d.Builder builder, boolean wrongInFp32, boolean lastRowOnly) {
        super(builder);
        this.wrongInFp32 = wrongInFp32;
        this.lastRowOnly = lastRowOnly;
    }

    /**
     * A convolution whose 16-bit kernel is wrong in every memory layout.
     *
     * @param filters output channels
     * @param kernel the square kernel's size
     * @param pad the padding on each side
     * @return the block
     */
    public static WrongLowPrecisionConv2d create(int filters, int kernel, int pad) {
        return new WrongLowPrecisionConv2d(builder(filters, kernel, pad), false, false);
    }

    /**
     * A convolution whose 16-bit kernel is wrong in the last sample of the batch only, as a kernel
     * that computes a partial last block of the batch apart could be.
     *
     * @param filters output channels
     * @param kernel the square kernel's size
     * @param pad the padding on each side
     * @return the block
     */
    public static WrongLowPrecisionConv2d wrongInLastSample(int filters, int kernel, int pad) {
        return new WrongLowPrecisionConv2d(builder(filters, kernel, pad), false, true);
    }

    /**
     * A convolution whose fp32 kernel is wrong (and 16-bit right).
     *
     * @param filters output channels
     * @param kernel the square kernel's size
     * @param pad the padding on each side
     * @return the block
     */
    public static WrongLowPrecisionConv2d wrongInFp32(int filters, int kernel, int pad) {
        return new WrongLowPrecisionConv2d(builder(filters, kernel, pad), true, false);
    }

    private static Conv2d.Builder builder(int filters, int kernel, int pad) {
        return Conv2d.builder()
                .setFilters(filters)
                .setKernelShape(new Shape(kernel, kernel))
                .optPadding(new Shape(pad, pad));
    }

    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        NDList outputs = super.forwardInternal(parameterStore, inputs, training, params);
        NDArray input = inputs.head();
        boolean low =
                AmpBackends.forManager(input.getManager()).precisionOf(input) != Precision.FP32;
        if (low == wrongInFp32) {
            return outputs;
        }
        NDArray y = outputs.head();
        if (!lastRowOnly) {
            return new NDList(y.add(GcSafe.mul(y.abs(), 0.5f)));
        }
        long last = y.getShape().get(0) - 1;
        NDArray lastRow = y.get(new NDIndex("{}:", last));
        return new NDList(
                NDArrays.concat(
                        new NDList(
                                y.get(new NDIndex(":{}", last)),
                                lastRow.add(GcSafe.mul(lastRow.abs(), 0.5f))),
                        0));
    }
}
