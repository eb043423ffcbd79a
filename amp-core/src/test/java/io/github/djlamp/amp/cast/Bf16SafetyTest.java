package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.LowPrecisionSafe;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Overrides that would hand bf16 arrays to blocks that may call softmax are refused up front. */
class Bf16SafetyTest {

    private static Block model() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(8).build())
                .add(new TransformerEncoderBlock(8, 2, 16, 0.0f, Activation::relu))
                .add(new LambdaBlock(list -> list))
                .add(Linear.builder().setUnits(2).build());
    }

    @Test
    void anAttentionBlockOverriddenToLowUnderBf16IsRefused() {
        PrecisionPolicy policy =
                PrecisionPolicy.parse(
                        "mixed_bfloat16[class:ai.djl.nn.transformer.TransformerEncoderBlock=low]");
        AmpException e =
                assertThrows(AmpException.class, () -> new MixedPrecisionBlock(model(), policy));
        assertTrue(e.getMessage().contains("02TransformerEncoderBlock"), e.getMessage());
        assertTrue(e.getMessage().contains("terminates the JVM"), e.getMessage());
        assertTrue(e.getMessage().contains("mixed_float16"), e.getMessage());
    }

    @Test
    void anUnknownLambdaOverriddenToPassThroughUnderBf16IsRefused() {
        PrecisionPolicy policy =
                PrecisionPolicy.parse("mixed_bfloat16[path:03LambdaBlock=pass_through]");
        assertThrows(AmpException.class, () -> new MixedPrecisionBlock(model(), policy));
    }

    @Test
    void theSameOverridesAreAllowedUnderFp16AndTowardsFp32() {
        assertDoesNotThrow(
                () ->
                        new MixedPrecisionBlock(
                                model(),
                                PrecisionPolicy.parse(
                                        "mixed_float16[class:ai.djl.nn.transformer"
                                                + ".TransformerEncoderBlock=low]")));
        assertDoesNotThrow(
                () ->
                        new MixedPrecisionBlock(
                                model(),
                                PrecisionPolicy.parse("mixed_bfloat16[path:01Linear=fp32]")));
    }

    /** A container holding a softmax lambda, as users write attention-like code. */
    private static Block softmaxInside() {
        return new SequentialBlock()
                .add(
                        new SequentialBlock()
                                .add(Linear.builder().setUnits(8).build())
                                .add(new LambdaBlock(x -> new NDList(x.head().softmax(1)))))
                .add(Linear.builder().setUnits(2).build());
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "mixed_bfloat16[path:01SequentialBlock=low]",
                "mixed_bfloat16[path:01SequentialBlock=pass_through]",
                "mixed_bfloat16[path:=low]",
                "mixed_bfloat16[path:=pass_through]",
                "mixed_bfloat16[class:ai.djl.nn.SequentialBlock=low]",
                "mixed_bfloat16[class:ai.djl.nn.SequentialBlock=pass_through]"
            })
    void anOverrideOnAContainerIsCheckedAgainstEverythingItReaches(String text) {
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () ->
                                new MixedPrecisionBlock(
                                        softmaxInside(), PrecisionPolicy.parse(text)));
        assertTrue(e.getMessage().contains("01SequentialBlock/02LambdaBlock"), e.getMessage());
        assertTrue(e.getMessage().contains("LowPrecisionSafe"), e.getMessage());
    }

    @Test
    void anOverrideOnAContainerReachingAnUnknownJoinIsRefused() {
        Block model =
                new SequentialBlock()
                        .add(
                                new ParallelBlock(
                                        list -> new NDList(list.get(0).head().softmax(1)),
                                        List.of(Linear.builder().setUnits(4).build())));
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () ->
                                new MixedPrecisionBlock(
                                        model, PrecisionPolicy.parse("mixed_bfloat16[path:=low]")));
        assertTrue(e.getMessage().contains("join function"), e.getMessage());
    }

    @Test
    void anOverrideOnAContainerOfSafeBlocksIsAllowed() {
        Block model =
                new SequentialBlock()
                        .add(
                                new SequentialBlock()
                                        .add(Linear.builder().setUnits(8).build())
                                        .add(Activation.reluBlock()))
                        .add(Linear.builder().setUnits(2).build());
        assertDoesNotThrow(
                () ->
                        new MixedPrecisionBlock(
                                model,
                                PrecisionPolicy.parse(
                                        "mixed_bfloat16[path:01SequentialBlock=low]")));
        assertDoesNotThrow(
                () ->
                        new MixedPrecisionBlock(
                                softmaxInside(),
                                PrecisionPolicy.parse("mixed_float16[path:=low]")));
    }

    /** A user's block whose author declares its forward safe in 16 bits. */
    static final class Declared extends TestBlock implements LowPrecisionSafe {
        Declared(Block child) {
            addChildBlock("inner", child);
        }
    }

    /** A user's block with no declaration. */
    static class TestBlock extends AbstractBlock {
        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            return inputs;
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return inputShapes;
        }
    }

    @Test
    void aBlockDeclaredLowPrecisionSafeComputesIn16BitsAndItsChildrenAreChecked() {
        Block declared = new Declared(Linear.builder().setUnits(4).build());
        assertEquals(CastCategory.LOW, PrecisionPolicy.mixedBfloat16().categoryOf(declared, ""));
        assertEquals(CastCategory.FP32, PrecisionPolicy.float32().categoryOf(declared, ""));
        assertEquals(
                CastCategory.FP32,
                PrecisionPolicy.mixedBfloat16().categoryOf(new TestBlock() {}, ""),
                "undeclared: opaque, fp32");
        assertDoesNotThrow(
                () -> new MixedPrecisionBlock(declared, PrecisionPolicy.mixedBfloat16()));
        Block hidingSoftmax = new Declared(new LambdaBlock(x -> new NDList(x.head().softmax(1))));
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () ->
                                new MixedPrecisionBlock(
                                        hidingSoftmax, PrecisionPolicy.mixedBfloat16()));
        assertTrue(e.getMessage().contains("inner"), e.getMessage());
    }
}
