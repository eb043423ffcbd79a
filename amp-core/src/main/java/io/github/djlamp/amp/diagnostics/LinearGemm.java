package io.github.djlamp.amp.diagnostics;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.nn.core.Linear;

/**
 * The GEMM of a {@link Linear} layer: the input viewed as an (M x K) matrix, M the product of its
 * leading dimensions and K its last dimension, times the (K x N) transposed weight, N the units.
 */
final class LinearGemm {

    private LinearGemm() {}

    static LayerGemm of(Linear linear, String path, Shape[] inputs) {
        String layer = LayerNames.describe(path, linear);
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
        if (input.dimension() < 1) {
            throw new IllegalArgumentException(
                    layer
                            + " needs an input of shape (rows..., in features) but receives a"
                            + " scalar shape (): give each input shape with its batch size"
                            + " first, e.g. (64, 100)");
        }
        long k = input.get(input.dimension() - 1);
        long m = input.slice(0, input.dimension() - 1).size();
        Shape output = linear.getOutputShapes(inputs)[0];
        long n = output.get(output.dimension() - 1);
        Parameter weight = linear.getDirectParameters().get("weight");
        Shape weightShape = weight == null ? null : weight.getShape();
        if (weightShape != null && weightShape.dimension() == 2 && weightShape.get(1) != k) {
            throw new IllegalArgumentException(
                    layer
                            + " was initialized for "
                            + weightShape.get(1)
                            + " input features, but the input shapes give it "
                            + k
                            + " (its input "
                            + input
                            + "): give the report the shapes the model was initialized with (the"
                            + " batch size may differ)");
        }
        return LayerGemm.linear(new GemmShape(m, n, k), input.dimension());
    }
}
