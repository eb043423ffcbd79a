package io.github.djlamp.amp.doctor;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.training.GradientCollector;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A layer forward and backward in fp32 through plain DJL ({@link Conv2d#conv2d} or {@link
 * Linear#linear} under a {@link GradientCollector}), every value of the output and of the input,
 * weight and bias gradients compared with {@link DirectReference}'s double-precision sums.
 */
class Fp32Case extends KernelCase {

    static final HostValues INPUT = new HostValues(1, 0);
    static final HostValues WEIGHT = new HostValues(0.5, 0.25);
    static final HostValues BIAS = new HostValues(0.1, 0.5);
    static final HostValues COTANGENT = new HostValues(1, 0.75);

    private final LayerSpec layer;

    Fp32Case(LayerSpec layer, String id, String description) {
        super(id, description);
        this.layer = layer;
    }

    /** The case for a layer, named by it. */
    static Fp32Case of(LayerSpec layer, String note) {
        return new Fp32Case(
                layer,
                "fp32/" + layer.slug(),
                "fp32 "
                        + layer.describe()
                        + note
                        + ": plain DJL forward and backward against double-precision sums");
    }

    LayerSpec layer() {
        return layer;
    }

    @Override
    Result run(Context context) {
        Shape out = layer.outputShape();
        float[] x = INPUT.values(layer.input().size());
        float[] w = WEIGHT.values(layer.weightShape().size());
        float[] b = BIAS.values(layer.outputs());
        float[] g = COTANGENT.values(out.size());
        List<float[]> actual = new ArrayList<>();
        try (NDManager scratch = context.manager.newSubManager(context.device)) {
            NDArray input = scratch.create(x, layer.input());
            NDArray weight = scratch.create(w, layer.weightShape());
            NDArray bias = scratch.create(b, new Shape(layer.outputs()));
            NDArray cotangent = scratch.create(g, out);
            input.setRequiresGradient(true);
            weight.setRequiresGradient(true);
            bias.setRequiresGradient(true);
            NDArray output;
            try (GradientCollector collector = scratch.getEngine().newGradientCollector()) {
                output = forward(input, weight, bias);
                collector.backward(output.mul(cotangent).sum());
            }
            actual.add(output.toFloatArray());
            actual.add(input.getGradient().toFloatArray());
            actual.add(weight.getGradient().toFloatArray());
            actual.add(bias.getGradient().toFloatArray());
        }
        List<DirectReference.Result> reference =
                layer.isConvolution()
                        ? DirectReference.convolution(layer, x, w, b, g)
                        : DirectReference.linear(layer, x, w, b, g);
        List<String> failures = new ArrayList<>();
        double worst = 0;
        for (DirectReference.Agreement agreement : DirectReference.compareAll(reference, actual)) {
            if (agreement.failure != null) {
                failures.add(agreement.failure);
            } else {
                worst = Math.max(worst, agreement.worstRatio);
            }
        }
        if (!failures.isEmpty()) {
            return Result.wrong(String.join("; ", failures));
        }
        return Result.right(
                String.format(
                        Locale.ROOT,
                        "output and input, weight, bias gradients right (largest error %.2g of"
                                + " its bound)",
                        worst));
    }

    /**
     * The layer's forward through plain DJL, recorded for the backward.
     *
     * @param input the input
     * @param weight the weight
     * @param bias the bias
     * @return the output
     */
    NDArray forward(NDArray input, NDArray weight, NDArray bias) {
        if (layer.isConvolution()) {
            Shape pad = new Shape(layer.pad(), layer.pad());
            return Conv2d.conv2d(input, weight, bias, new Shape(1, 1), pad, new Shape(1, 1), 1)
                    .singletonOrThrow();
        }
        return Linear.linear(input, weight, bias).singletonOrThrow();
    }
}
