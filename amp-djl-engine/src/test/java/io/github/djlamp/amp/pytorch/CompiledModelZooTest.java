package io.github.djlamp.amp.pytorch;

import static io.github.djlamp.amp.pytorch.CompiledSteps.assertCompiledAsEager;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.basicmodelzoo.cv.classification.MobileNetV2;
import ai.djl.basicmodelzoo.cv.classification.SqueezeNet;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.verify.KernelVerification;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * DJL's model-zoo networks whose forward was eager in part: ReLU6 ({@code minimum(6, relu(x))},
 * MobileNetV2's activation), SqueezeNet's fire join (the first branch's list with the second's
 * appended, concatenated), MobileNetV2's residual join ({@code NDArrays.add} of two arrays).
 * Compiled, each is bitwise DJL's eager fp32 and djl-amp's eager bf16: outputs, gradients and
 * running statistics.
 */
class CompiledModelZooTest {

    /** Inputs 20 times a standard normal's, so that ReLU6 clips many values at 6. */
    private static final float LARGE = 20f;

    @Test
    void relu6IsBitwiseDjl() {
        assertFp32Bitwise(CompiledModelZooTest::relu6Network, new Shape(2, 3, 8, 8), LARGE, 1);
    }

    @Test
    void relu6InBf16IsTheEagerBf16Wrapper() {
        assertBf16AsEager(CompiledModelZooTest::relu6Network, new Shape(2, 3, 8, 8), LARGE, 1);
    }

    @Test
    void squeezeNetIsBitwiseDjl() {
        assertFp32Bitwise(() -> SqueezeNet.squeezenet(10), new Shape(1, 3, 48, 48), 1f, 1);
    }

    @Test
    void squeezeNetInBf16IsTheEagerBf16Wrapper() {
        assertBf16AsEager(() -> SqueezeNet.squeezenet(10), new Shape(1, 3, 48, 48), 1f, 1);
    }

    /**
     * MobileNetV2 ends with two reshape lambdas of its own, each capturing its builder and reading
     * the batch's size from its input ({@code array.reshape(array.getShape().get(0),
     * builder.filters[8], 1, 1)}): read from their code, the whole network is one compiled call.
     */
    @Test
    void mobileNetV2IsBitwiseDjl() {
        assertCompiledAsEager(
                        CompiledModelZooTest::mobileNetV2,
                        new Shape(2, 3, 32, 32),
                        1f,
                        "float32",
                        KernelVerification.OFF)
                .assertWhole();
    }

    @Test
    void mobileNetV2InBf16IsTheEagerBf16Wrapper() {
        assertCompiledAsEager(
                        CompiledModelZooTest::mobileNetV2,
                        new Shape(2, 3, 32, 32),
                        1f,
                        "mixed_bfloat16",
                        KernelVerification.OFF)
                .assertWhole();
    }

    /**
     * Reshapes a user writes as lambdas: sizes from the input's shape, a captured int, a number,
     * -1; the lambda added as a singleton and as a lambda on lists.
     */
    @Test
    void reshapeLambdasOfTheUsersOwnAreBitwiseDjl() {
        assertCompiledAsEager(
                        () -> Reshapes.network(4),
                        new Shape(2, 3, 8, 8),
                        1f,
                        "float32",
                        KernelVerification.OFF)
                .assertWhole();
    }

    @Test
    void reshapeLambdasOfTheUsersOwnInBf16AreTheEagerBf16Wrapper() {
        assertCompiledAsEager(
                        () -> Reshapes.network(4),
                        new Shape(2, 3, 8, 8),
                        1f,
                        "mixed_bfloat16",
                        KernelVerification.OFF)
                .assertWhole();
    }

    /** A lambda computing what the reading does not follow runs eagerly, named with the call. */
    @Test
    void aLambdaThatComputesOtherwiseRunsEagerlyNamingTheCall() {
        CompiledSteps.Compiled compiled =
                assertCompiledAsEager(
                        Squares::network,
                        new Shape(2, 3, 8, 8),
                        1f,
                        "float32",
                        KernelVerification.OFF);
        assertEquals(
                "02LambdaBlock: a lambda that is not one of DJL's functions: its code calls"
                        + " ai.djl.ndarray.NDArray.mul",
                compiled.wrapped().compiledForwardRefusal(compiled.device()));
    }

    private static Block relu6Network() {
        return new SequentialBlock()
                .add(Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(8).build())
                .add(Activation.relu6Block())
                .add(Conv2d.builder().setKernelShape(new Shape(1, 1)).setFilters(4).build())
                .add(Activation::relu6)
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(5).build());
    }

    private static Block mobileNetV2() {
        return MobileNetV2.builder()
                .setOutSize(10)
                .optRepeatTimes(new int[] {1, 1, 2, 2, 1, 1, 1, 1, 1})
                .build();
    }

    private static void assertFp32Bitwise(
            Supplier<Block> network, Shape inputShape, float inputScale, int runs) {
        assertCompiledAsEager(network, inputShape, inputScale, "float32", KernelVerification.OFF)
                .assertRuns(runs);
    }

    private static void assertBf16AsEager(
            Supplier<Block> network, Shape inputShape, float inputScale, int runs) {
        assertCompiledAsEager(
                        network, inputShape, inputScale, "mixed_bfloat16", KernelVerification.OFF)
                .assertRuns(runs);
    }

    /**
     * Lambdas of their own class: lambdas that capture the same types in one class are told apart
     * only by the probe, and where it cannot tell them (as between these and ReLU6's method
     * reference above) the lambda runs eagerly.
     */
    private static final class Reshapes {
        static Block network(int channels) {
            return new SequentialBlock()
                    .add(Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(8).build())
                    .addSingleton(array -> array.reshape(array.getShape().get(0), channels, -1))
                    .add(
                            new LambdaBlock(
                                    list -> {
                                        NDArray array = list.singletonOrThrow();
                                        return new NDList(
                                                array.reshape(array.getShape().get(0), 2, 2, 72));
                                    }))
                    .add(Blocks.batchFlattenBlock())
                    .add(Linear.builder().setUnits(3).build());
        }
    }

    private static final class Squares {
        static Block network() {
            return new SequentialBlock()
                    .add(Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(4).build())
                    .addSingleton(array -> array.mul(array))
                    .add(Blocks.batchFlattenBlock())
                    .add(Linear.builder().setUnits(3).build());
        }
    }
}
