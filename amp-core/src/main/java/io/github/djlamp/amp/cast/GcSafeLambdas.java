package io.github.djlamp.amp.cast;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import io.github.djlamp.amp.policy.KnownFunctions;
import java.util.List;

/**
 * DJL functions whose number DJL's PyTorch engine turns into an array over a Java buffer that the
 * garbage collector may free while backward still reads it, run instead as the same computation
 * with the number made by the engine.
 *
 * <p>DJL's ReLU6 is {@code minimum(relu(x), 6)} with the 6 made by {@code manager.create(6)}:
 * libtorch's tensor borrows a direct buffer that the Java array owns, and DJL closes that array
 * right after the call. Autograd keeps the tensor for {@code minimum}'s backward; once a collection
 * frees the buffer, backward compares against whatever the memory then holds. With DJL's
 * MobileNetV2 under {@code EasyTrain}, a collection between the first forward and its backward
 * (djl-amp plans the compiled forward there) left every layer before the last bottleneck with a
 * zero or wrong gradient, in plain DJL's computation, differently from run to run.
 */
final class GcSafeLambdas {

    private GcSafeLambdas() {}

    /** The block a stage runs for {@code block}: a safe copy of a DJL function, or the block. */
    static Block replacing(Block block) {
        if (!(block instanceof LambdaBlock lambda)) {
            return block;
        }
        String label = KnownFunctions.labelOf(lambda);
        if ("ReLU6".equals(label)) {
            return new LambdaBlock(GcSafeLambdas::relu6, lambda.getName());
        }
        List<Object> captured =
                "Swish".equals(label) ? KnownFunctions.capturedValues(lambda) : null;
        if (captured != null && captured.size() == 1 && captured.get(0) instanceof Float beta) {
            return new LambdaBlock(arrays -> swish(arrays, beta), lambda.getName());
        }
        return block;
    }

    /**
     * DJL's {@code Activation.swish}, {@code sigmoid(x * beta) * x}, its beta a float32 array as
     * DJL makes it, libtorch's own.
     */
    static NDList swish(NDList arrays, float beta) {
        NDArray x = arrays.singletonOrThrow();
        try (NDArray b = x.getManager().full(new Shape(), beta, DataType.FLOAT32, x.getDevice())) {
            return new NDList(Activation.sigmoid(x.mul(b)).mul(x));
        }
    }

    /** DJL's {@code Activation.relu6}, its 6 an int32 array as DJL makes it, libtorch's own. */
    static NDList relu6(NDList arrays) {
        NDArray x = arrays.singletonOrThrow();
        try (NDArray six = x.getManager().full(new Shape(), 6, DataType.INT32, x.getDevice())) {
            return new NDList(x.getNDArrayInternal().relu().minimum(six));
        }
    }
}
