package io.github.djlamp.amp.policy;

import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.internal.DjlSeam;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The {@link LambdaBlock} names DJL's own factory methods give to lambdas that are safe to run on
 * 16-bit input as they are.
 *
 * <p>A lambda's function cannot be inspected, only its name. These names come from {@code
 * ai.djl.nn.Activation}, {@code ai.djl.nn.pooling.Pool} and {@code ai.djl.nn.Blocks}; every one of
 * them is an element-wise activation, a pooling or a reshape, and none calls softmax or log-softmax
 * (which terminate the JVM on bf16 arrays in DJL's PyTorch engine). Left out on purpose: {@link
 * LambdaBlock#DEFAULT_NAME} ({@code anonymous}, any user lambda), {@code ones} from {@code
 * Blocks.onesBlock} (makes new arrays of a fixed type rather than transforming its input), the
 * class-derived names {@code LambdaBlock.singleton(Function)} gives, {@code avgPool3d} (PyTorch
 * 2.7.1 has no bf16 CPU kernel for it: "avg_pool3d_out_frame not implemented for 'BFloat16'") and
 * {@code lpPool3d}/{@code globalLpPool3d} (DJL's PyTorch engine does not support them at all). A
 * user lambda that takes one of these names is trusted to behave like DJL's.
 *
 * <p>Every name listed was checked with DJL 0.35.1 and PyTorch 2.7.1 on CPU (0.36.0 has the same
 * code): the block run forward and backward, in training and in inference, on a bf16 input made by
 * the engine backend; each returned bf16, close to its fp32 result, with gradients reaching the
 * fp32 input.
 */
final class KnownLambdas {

    /** Names from {@code Activation.*Block()}. Case matters: these are DJL's exact strings. */
    private static final Set<String> ACTIVATIONS =
            Set.of(
                    "ReLU",
                    "ReLU6",
                    "sigmoid",
                    "Tanh",
                    "softPlus",
                    "softSign",
                    "LeakyReLU",
                    "ELU",
                    "SELU",
                    "GELU",
                    "Swish",
                    "Mish");

    /** Names from {@code Pool.*Block(...)}. */
    private static final Set<String> POOLING =
            Set.of(
                    "maxPool1d",
                    "maxPool2d",
                    "maxPool3d",
                    "globalMaxPool1d",
                    "globalMaxPool2d",
                    "globalMaxPool3d",
                    "avgPool1d",
                    "avgPool2d",
                    "globalAvgPool1d",
                    "globalAvgPool2d",
                    "globalAvgPool3d",
                    "lpPool1d",
                    "lpPool2d",
                    "globalLpPool1d",
                    "globalLpPool2d");

    /** Names from {@code Blocks.batchFlattenBlock(...)} and {@code Blocks.identityBlock()}. */
    private static final Set<String> RESHAPES = Set.of("batchFlatten", "identity");

    /**
     * Model-zoo classes of DJL whose own unnamed lambdas are all {@code Activation::relu} or {@code
     * Activation::sigmoid} (read from their sources): they add activations through {@code
     * SequentialBlock.add(Function)}, and Mlp's default activation is {@code Activation::relu}. A
     * lambda written in another class (a user's activation passed to Mlp) is not covered.
     */
    private static final Set<String> ACTIVATION_ONLY_CAPTURERS =
            Set.of(
                    "ai.djl.basicmodelzoo.cv.classification.ResNetV1",
                    "ai.djl.basicmodelzoo.basic.Mlp",
                    "ai.djl.basicmodelzoo.cv.classification.AlexNet",
                    "ai.djl.basicmodelzoo.cv.classification.VGG",
                    "ai.djl.basicmodelzoo.cv.classification.NiN",
                    "ai.djl.basicmodelzoo.cv.classification.GoogLeNet",
                    "ai.djl.basicmodelzoo.cv.classification.SqueezeNet",
                    "ai.djl.basicmodelzoo.cv.classification.LeNet");

    /**
     * Model-zoo classes of DJL whose ParallelBlock join functions are known (read from their
     * sources): ResNetV1 adds its two branches and applies relu, GoogLeNet and SqueezeNet
     * concatenate theirs on the channel axis. None calls softmax or makes arrays of its input's
     * data type.
     */
    private static final Set<String> JOIN_CAPTURERS =
            Set.of(
                    "ai.djl.basicmodelzoo.cv.classification.ResNetV1",
                    "ai.djl.basicmodelzoo.cv.classification.GoogLeNet",
                    "ai.djl.basicmodelzoo.cv.classification.SqueezeNet");

    private KnownLambdas() {}

    /** Returns whether {@code lambda} carries one of DJL's known-safe names. */
    static boolean isPassThrough(LambdaBlock lambda) {
        String name = lambda.getName();
        if (name != null
                && (ACTIVATIONS.contains(name)
                        || POOLING.contains(name)
                        || RESHAPES.contains(name))) {
            return true;
        }
        return LambdaBlock.DEFAULT_NAME.equals(name)
                && writtenIn(
                        functionOf(() -> DjlSeam.lambdaFunction(lambda)),
                        ACTIVATION_ONLY_CAPTURERS);
    }

    /**
     * Returns whether the join function of {@code block} is one of the model zoo's known ones, safe
     * on 16-bit branch outputs.
     */
    static boolean isKnownJoin(ParallelBlock block) {
        return writtenIn(functionOf(() -> DjlSeam.parallelJoin(block)), JOIN_CAPTURERS);
    }

    /**
     * Returns whether the function of {@code lambda} was written in the code of one of {@code
     * vouched}: see {@link #writtenByVouched(Object, List)}.
     */
    static boolean lambdaWrittenBy(LambdaBlock lambda, List<Class<?>> vouched) {
        return !vouched.isEmpty()
                && writtenByVouched(functionOf(() -> DjlSeam.lambdaFunction(lambda)), vouched);
    }

    /**
     * Returns whether the join function of {@code block} was written in the code of one of {@code
     * vouched}: see {@link #writtenByVouched(Object, List)}.
     */
    static boolean joinWrittenBy(ParallelBlock block, List<Class<?>> vouched) {
        return !vouched.isEmpty()
                && writtenByVouched(functionOf(() -> DjlSeam.parallelJoin(block)), vouched);
    }

    /**
     * Whether {@code function} is a Java lambda (or method reference) written in the code of a
     * block class someone vouches for ({@code LowPrecisionSafe}, {@code class:X=trusted}): in the
     * class itself, a class nested in it, or one of its superclasses outside DJL (d2l-java's {@code
     * Residual} writes its ParallelBlock's join and its {@code Activation::relu} in its
     * constructor). That code is the vouched block's own, under the same promise; a function
     * written elsewhere and handed in is not.
     */
    private static boolean writtenByVouched(Object function, List<Class<?>> vouched) {
        if (function == null) {
            return false;
        }
        String className = function.getClass().getName();
        int marker = className.indexOf("$$Lambda");
        if (marker <= 0) {
            return false;
        }
        String writer = className.substring(0, marker);
        for (Class<?> block : vouched) {
            for (Class<?> c = block; c != null; c = c.getSuperclass()) {
                if (c.getName().startsWith("ai.djl.") || c == Object.class) {
                    break;
                }
                if (writer.equals(c.getName()) || writer.startsWith(c.getName() + "$")) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Reads a function through the seam; null (unknown: not trusted) where DJL lacks its field. */
    private static Object functionOf(Supplier<Object> read) {
        try {
            return read.get();
        } catch (AmpException e) {
            return null;
        }
    }

    /**
     * Whether {@code function} was written in one of {@code classes}: a Java lambda's class is
     * named after the class that wrote it ({@code ResNetV1$$Lambda...}).
     */
    private static boolean writtenIn(Object function, Set<String> classes) {
        if (function == null) {
            return false;
        }
        String className = function.getClass().getName();
        int marker = className.indexOf("$$Lambda");
        return marker > 0 && classes.contains(className.substring(0, marker));
    }
}
