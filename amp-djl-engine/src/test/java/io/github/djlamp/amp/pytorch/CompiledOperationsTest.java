package io.github.djlamp.amp.pytorch;

import static io.github.djlamp.amp.pytorch.CompiledSteps.compiledStep;
import static io.github.djlamp.amp.pytorch.CompiledSteps.initialize;
import static io.github.djlamp.amp.pytorch.CompiledSteps.step;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.norm.LayerNorm;
import ai.djl.nn.pooling.Pool;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.verify.KernelVerification;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The operations the compiled forward reproduces beyond convolutions, BatchNorm and linear layers:
 * max and average pooling with the settings DJL's factories captured, LayerNorm, Dropout (the same
 * random draws as DJL's) and GELU. Each network runs as one native call, bitwise DJL's eager fp32
 * and djl-amp's eager bf16.
 */
class CompiledOperationsTest {

    private static final Shape IMAGES = new Shape(2, 3, 12, 12);
    private static final Shape FEATURES = new Shape(4, 10);

    @Test
    void poolingWithItsCapturedSettingsIsBitwiseDjl() {
        assertFp32Bitwise(CompiledOperationsTest::pooling, IMAGES);
    }

    @Test
    void poolingInBf16IsTheEagerBf16Wrapper() {
        assertBf16AsEager(CompiledOperationsTest::pooling, IMAGES);
    }

    @Test
    void layerNormDropoutAndGeluAreBitwiseDjl() {
        assertFp32Bitwise(CompiledOperationsTest::feedForward, FEATURES);
    }

    @Test
    void layerNormDropoutAndGeluInBf16AreTheEagerBf16Wrapper() {
        assertBf16AsEager(CompiledOperationsTest::feedForward, FEATURES);
    }

    /** Kernel, stride and padding all differ, so that settings read in the wrong order show. */
    private static Block pooling() {
        return new SequentialBlock()
                .add(Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(8).build())
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(Pool.maxPool2dBlock(new Shape(3, 2), new Shape(2, 1), new Shape(1, 0), true))
                .add(Conv2d.builder().setKernelShape(new Shape(1, 1)).setFilters(4).build())
                .add(Pool.avgPool2dBlock(new Shape(2, 3), new Shape(1, 2), new Shape(1, 1)))
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(5).build());
    }

    private static Block feedForward() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(16).build())
                .add(LayerNorm.builder().build())
                .add(Activation.geluBlock())
                .add(Dropout.builder().optRate(0.5f).build())
                .add(Linear.builder().setUnits(3).build());
    }

    private static void assertFp32Bitwise(Supplier<Block> network, Shape inputShape) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block plain = network.get();
            NDArray x = initialize(plain, manager, inputShape);
            List<float[]> eager = step(plain, x);
            Block block = network.get();
            initialize(block, manager, inputShape);
            MixedPrecisionBlock wrapped = Amp.wrap(block, "float32").compileForward(true);
            assertSame(eager, compiledStep(wrapped, x));
            assertTrue(
                    wrapped.isForwardCompiled(x.getDevice()),
                    () -> wrapped.compiledForwardRefusal(x.getDevice()));
        }
    }

    private static void assertBf16AsEager(Supplier<Block> network, Shape inputShape) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block eagerBlock = network.get();
            NDArray x = initialize(eagerBlock, manager, inputShape);
            List<float[]> eager =
                    step(Amp.wrap(eagerBlock, "mixed_bfloat16", KernelVerification.OFF), x);
            Block block = network.get();
            initialize(block, manager, inputShape);
            MixedPrecisionBlock wrapped =
                    Amp.wrap(block, "mixed_bfloat16", KernelVerification.OFF).compileForward(true);
            assertSame(eager, compiledStep(wrapped, x));
            assertTrue(
                    wrapped.isForwardCompiled(x.getDevice()),
                    () -> wrapped.compiledForwardRefusal(x.getDevice()));
        }
    }

    private static void assertSame(List<float[]> eager, List<float[]> compiled) {
        assertEquals(eager.size(), compiled.size());
        for (int i = 0; i < eager.size(); i++) {
            assertArrayEquals(eager.get(i), compiled.get(i), 0f, "array " + i);
        }
    }
}
