package io.github.djlamp.amp.pytorch;

import static io.github.djlamp.amp.pytorch.CompiledSteps.assertCompiledAsEager;
import static io.github.djlamp.amp.pytorch.CompiledSteps.assertSameArrays;
import static io.github.djlamp.amp.pytorch.CompiledSteps.compiledStep;
import static io.github.djlamp.amp.pytorch.CompiledSteps.initialize;
import static io.github.djlamp.amp.pytorch.CompiledSteps.step;
import static org.junit.jupiter.api.Assertions.assertFalse;

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
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.verify.KernelVerification;
import io.github.djlamp.amp.verify.WrongProductVerdicts;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The operations the compiled forward reproduces beyond convolutions, BatchNorm and linear layers:
 * max and average pooling with the settings DJL's factories captured, LayerNorm, Dropout (the same
 * random draws as DJL's), GELU, LeakyReLU, and DJL's attention and transformer encoder. Each
 * network runs as one native call, bitwise DJL's eager fp32 and djl-amp's eager bf16.
 */
class CompiledOperationsTest {

    private static final Shape IMAGES = new Shape(2, 3, 12, 12);
    private static final Shape FEATURES = new Shape(4, 10);
    private static final Shape SEQUENCES = new Shape(2, 5, 10);

    @Test
    void poolingWithItsCapturedSettingsIsBitwiseDjl() {
        assertFp32Bitwise(CompiledOperationsTest::pooling, IMAGES);
    }

    @Test
    void poolingInBf16IsTheEagerBf16Wrapper() {
        assertBf16AsEager(CompiledOperationsTest::pooling, IMAGES);
    }

    @Test
    void leakyReluIsBitwiseDjl() {
        assertFp32Bitwise(CompiledOperationsTest::darknetUnit, IMAGES);
    }

    @Test
    void leakyReluInBf16IsTheEagerBf16Wrapper() {
        assertBf16AsEager(CompiledOperationsTest::darknetUnit, IMAGES);
    }

    @Test
    void layerNormDropoutAndGeluAreBitwiseDjl() {
        assertFp32Bitwise(CompiledOperationsTest::feedForward, FEATURES);
    }

    @Test
    void layerNormDropoutAndGeluInBf16AreTheEagerBf16Wrapper() {
        assertBf16AsEager(CompiledOperationsTest::feedForward, FEATURES);
    }

    @Test
    void transformerEncodersAreBitwiseDjl() {
        assertFp32Bitwise(CompiledOperationsTest::encoders, SEQUENCES);
    }

    @Test
    void transformerEncodersInBf16AreTheEagerBf16Wrapper() {
        assertBf16AsEager(CompiledOperationsTest::encoders, SEQUENCES);
    }

    @Test
    void attentionAloneIsBitwiseDjl() {
        assertFp32Bitwise(CompiledOperationsTest::attention, SEQUENCES);
    }

    @Test
    void attentionAloneInBf16IsTheEagerBf16Wrapper() {
        assertBf16AsEager(CompiledOperationsTest::attention, SEQUENCES);
    }

    /**
     * Where the kernel check of an attention product found it wrong (planted here, as on a platform
     * whose batched bf16 product is broken at that signature), the compiled graph computes it in
     * fp32 as the eager forward does.
     */
    @Test
    void anAttentionProductFoundWrongRunsInFp32Compiled() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block eagerBlock = attention();
            NDArray x = initialize(eagerBlock, manager, SEQUENCES);
            List<float[]> inBf16 =
                    step(Amp.wrap(eagerBlock, "mixed_bfloat16").compileForward(false), x);
            Shape heads = new Shape(2, 2, 5, 5);
            WrongProductVerdicts.forgetAll();
            try {
                WrongProductVerdicts.record(
                        AmpBackends.forManager(manager),
                        "attention scores",
                        heads,
                        heads,
                        x.getDevice(),
                        Precision.BF16);
                Block fallingBack = attention();
                initialize(fallingBack, manager, SEQUENCES);
                List<float[]> eager =
                        step(Amp.wrap(fallingBack, "mixed_bfloat16").compileForward(false), x);
                assertFalse(
                        Arrays.equals(inBf16.get(0), eager.get(0)),
                        "the planted verdict puts the scores in fp32");
                Block block = attention();
                initialize(block, manager, SEQUENCES);
                MixedPrecisionBlock wrapped =
                        Amp.wrap(block, "mixed_bfloat16").compileForward(true);
                assertSameArrays(eager, compiledStep(wrapped, x));
            } finally {
                WrongProductVerdicts.forgetAll();
            }
        }
    }

    /**
     * Two of DJL's encoder blocks with dropout (so that the random draws' order shows), the first
     * taking a 16-bit input from the projection before it under bf16; 3 heads of size 4 make the
     * attention's scale 1/2 rounded.
     */
    private static Block encoders() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(12).build())
                .add(new TransformerEncoderBlock(12, 3, 20, 0.2f, Activation::gelu))
                .add(new TransformerEncoderBlock(12, 3, 20, 0.2f, Activation::relu))
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    /** DJL's attention on its own, after an fp32 input (no projection before it). */
    private static Block attention() {
        return new SequentialBlock()
                .add(
                        ScaledDotProductAttentionBlock.builder()
                                .setEmbeddingSize(10)
                                .setHeadCount(2)
                                .optAttentionProbsDropoutProb(0.3f)
                                .build())
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(3).build());
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

    /** YOLOv3's darknet unit: convolution, BatchNorm, LeakyReLU with alpha 0.1. */
    private static Block darknetUnit() {
        return new SequentialBlock()
                .add(Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(4).build())
                .add(BatchNorm.builder().build())
                .add(Activation.leakyReluBlock(0.1f))
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
        assertCompiledAsEager(network, inputShape, 1f, "float32", KernelVerification.ON)
                .assertWhole();
    }

    private static void assertBf16AsEager(Supplier<Block> network, Shape inputShape) {
        assertCompiledAsEager(network, inputShape, 1f, "mixed_bfloat16", KernelVerification.OFF)
                .assertWhole();
    }
}
