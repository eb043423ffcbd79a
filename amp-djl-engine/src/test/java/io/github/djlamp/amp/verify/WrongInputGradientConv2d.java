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
 * A test double of a broken platform whose 16-bit convolution computes the forward pass and the
 * weight gradient right and the input gradient wrong: in 16 bits it adds {@code x - detach(x)},
 * zero, to its output (its input {@code x} and output have one shape: as many filters as input
 * channels, padding that keeps the size), so the input gradient is off by the output gradient. Only
 * a check that covers the input gradient finds it. The other kind ({@link #leakingToNextSample})
 * adds each sample's successor instead, {@code x[n + 1] - detach(x[n + 1])}, so that the gradient
 * of sample n leaks into sample n + 1's input gradient.
 */
public final class WrongInputGradientConv2d extends Conv2d {

    private final boolean toNextSample;

    private WrongInputGradientConv2d(Conv2d.Builder builder, boolean toNextSample) {
        super(builder);
        this.toNextSample = toNextSample;
    }

    /**
     * A square convolution whose 16-bit input gradient is wrong.
     *
     * @param filters output channels, as many as the input has
     * @param kernel the kernel's size
     * @param pad the padding on each side
     * @return the block
     */
    public static WrongInputGradientConv2d create(int filters, int kernel, int pad) {
        return new WrongInputGradientConv2d(builder(filters, kernel, pad), false);
    }

    /**
     * A square convolution whose 16-bit input gradient of each sample holds the output gradient of
     * the sample before it.
     *
     * @param filters output channels, as many as the input has
     * @param kernel the kernel's size
     * @param pad the padding on each side
     * @return the block
     */
    public static WrongInputGradientConv2d leakingToNextSample(int filters, int kernel, int pad) {
        return new WrongInputGradientConv2d(builder(filters, kernel, pad), true);
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
        if (AmpBackends.forManager(input.getManager()).precisionOf(input) == Precision.FP32) {
            return outputs;
        }
        NDArray source = input;
        if (toNextSample) {
            // x[1:], then a zero sample in the last place
            source =
                    NDArrays.concat(
                            new NDList(
                                    input.get(new NDIndex("1:")),
                                    GcSafe.mul(input.get(new NDIndex(":1")), 0f)),
                            0);
        }
        // the numbers made by the engine: backward reads them (GcSafe)
        return new NDList(outputs.head().add(GcSafe.mul(source.sub(source.stopGradient()), 16f)));
    }
}
