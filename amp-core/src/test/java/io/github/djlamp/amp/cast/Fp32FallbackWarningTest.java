package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import org.junit.jupiter.api.Test;

/** The one-line change the fallback WARN suggests for the unit with the most fp32 arithmetic. */
class Fp32FallbackWarningTest {

    private static String adviceFor(String policyName) {
        SequentialBlock model =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(8).build())
                        .add(Linear.builder().setUnits(2).build());
        PrecisionPolicy policy = PrecisionPolicy.parse(policyName);
        ModelPlan plan = ModelPlan.of(policy, model, block -> false);
        ArithmeticShare share = new ArithmeticShare(Precision.BF16);
        share.recordProduct("01Linear", "Linear", Precision.FP32, 9000);
        share.recordProduct("02Linear", "Linear", Precision.BF16, 1000);
        return Fp32FallbackWarning.advice(plan, share.getFp32Units());
    }

    /** A layer the user's own override keeps in fp32: vouching for its class would not help. */
    @Test
    void anOverriddenLayerIsToldToDropTheOverride() {
        String name = "mixed_bfloat16[path:01Linear=fp32]";
        assertEquals(
                "'01Linear' runs in fp32 because an override in the policy \""
                        + name
                        + "\" says so: remove that override to compute it in bfloat16.",
                adviceFor(name));
    }

    /**
     * A block of its own forward that reaches a lambda of unknown content (DJL's TabNet): vouching
     * for it would be refused in bf16, so the advice does not suggest it there.
     */
    @Test
    void aUnitWhoseTrustBf16WouldRefuseIsNotToldToVouchInBf16() {
        SequentialBlock model =
                new SequentialBlock()
                        // the lambda is written here, outside the block: unknown content to it
                        .add(
                                new OwnForward(
                                        new ai.djl.nn.LambdaBlock(
                                                x ->
                                                        io.github.djlamp.amp.policy.UnknownCode
                                                                .same(x))))
                        .add(Linear.builder().setUnits(2).build());
        ArithmeticShare share = new ArithmeticShare(Precision.BF16);
        share.recordProduct("01OwnForward", "OwnForward", Precision.FP32, 9000);
        share.recordProduct("02Linear", "Linear", Precision.BF16, 1000);
        String bf16 =
                Fp32FallbackWarning.advice(
                        ModelPlan.of(PrecisionPolicy.parse("mixed_bfloat16"), model, b -> false),
                        share.getFp32Units());
        assertTrue(bf16.startsWith("Vouching for it would be refused in bfloat16"), bf16);
        assertTrue(bf16.contains("01OwnForward/01inner"), bf16);
        assertTrue(
                bf16.contains("mixed_float16[class:" + OwnForward.class.getName() + "=trusted]"),
                bf16);
        String fp16 =
                Fp32FallbackWarning.advice(
                        ModelPlan.of(PrecisionPolicy.parse("mixed_float16"), model, b -> false),
                        share.getFp32Units());
        assertTrue(fp16.contains("=trusted]"), fp16);
    }

    /** A block with a forward of its own around a block it is handed. */
    private static final class OwnForward extends ai.djl.nn.AbstractBlock {
        private final ai.djl.nn.Block inner;

        OwnForward(ai.djl.nn.Block inner) {
            this.inner = addChildBlock("inner", inner);
        }

        @Override
        protected ai.djl.ndarray.NDList forwardInternal(
                ai.djl.training.ParameterStore store,
                ai.djl.ndarray.NDList inputs,
                boolean training,
                ai.djl.util.PairList<String, Object> params) {
            return inner.forward(store, inputs, training);
        }

        @Override
        public ai.djl.ndarray.types.Shape[] getOutputShapes(
                ai.djl.ndarray.types.Shape[] inputShapes) {
            return inputShapes;
        }
    }

    /**
     * DJL's own block that a rule keeps in fp32 for its numerics (BERT's masked-language-model head
     * calls logSoftmax): vouching for it would put that in 16 bits, and the advice said to (DJL's
     * TrainBertOnGoemotions at a large vocabulary). A lambda of unknown content is told how to
     * write it, not to vouch for every LambdaBlock.
     */
    @Test
    void djlsOwnFp32BlocksAndLambdasAreNotToldToVouch() {
        Block head =
                new ai.djl.nn.transformer.BertMaskedLanguageModelBlock(
                        ai.djl.nn.transformer.BertBlock.builder()
                                .micro()
                                .setTokenDictionarySize(100)
                                .build(),
                        ai.djl.nn.Activation::gelu);
        Block lambda =
                new ai.djl.nn.LambdaBlock(x -> io.github.djlamp.amp.policy.UnknownCode.same(x));
        SequentialBlock model =
                new SequentialBlock()
                        .add(head)
                        .add(lambda)
                        .add(Linear.builder().setUnits(2).build());
        ModelPlan plan = ModelPlan.of(PrecisionPolicy.parse("mixed_bfloat16"), model, b -> false);
        ArithmeticShare share = new ArithmeticShare(Precision.BF16);
        share.recordProduct("01BertMaskedLanguageModelBlock", "MLM", Precision.FP32, 9000);
        share.recordProduct("03Linear", "Linear", Precision.BF16, 1000);
        String advice = Fp32FallbackWarning.advice(plan, share.getFp32Units());
        assertFalse(advice.contains("=trusted]"), advice);
        assertTrue(advice.contains("DJL's own BertMaskedLanguageModelBlock"), advice);

        ArithmeticShare lambdaFirst = new ArithmeticShare(Precision.BF16);
        lambdaFirst.recordProduct("02LambdaBlock", "Lambda", Precision.FP32, 9000);
        String forLambda = Fp32FallbackWarning.advice(plan, lambdaFirst.getFp32Units());
        assertFalse(forLambda.contains("=trusted]"), forLambda);
        assertTrue(forLambda.contains("Lambdas and speed"), forLambda);
    }

    /** A layer the policy keeps in fp32 by its own rule: the usual advice. */
    @Test
    void aLayerThatRanInFp32ForAnotherReasonGetsTheUsualAdvice() {
        String advice = adviceFor("mixed_bfloat16");
        assertTrue(advice.contains("LowPrecisionSafe") && advice.contains("=trusted]"), advice);
    }

    /** A block of the user's own whose forward calls softmax after its child. */
    private static final class SoftmaxHead extends ai.djl.nn.AbstractBlock {
        private final ai.djl.nn.Block inner =
                addChildBlock("inner", Linear.builder().setUnits(2).build());

        @Override
        protected ai.djl.ndarray.NDList forwardInternal(
                ai.djl.training.ParameterStore store,
                ai.djl.ndarray.NDList inputs,
                boolean training,
                ai.djl.util.PairList<String, Object> params) {
            return new ai.djl.ndarray.NDList(
                    inner.forward(store, inputs, training).head().softmax(1));
        }

        @Override
        public ai.djl.ndarray.types.Shape[] getOutputShapes(
                ai.djl.ndarray.types.Shape[] inputShapes) {
            return inputShapes;
        }
    }

    /** Where djl-amp read a block's forward and stopped, the advice says at what. */
    @Test
    void aBlockWhoseForwardCouldNotBeReadSaysWhereTheReadingStopped() {
        SequentialBlock model = new SequentialBlock().add(new SoftmaxHead());
        ArithmeticShare share = new ArithmeticShare(Precision.BF16);
        share.recordProduct("01SoftmaxHead", "SoftmaxHead", Precision.FP32, 9000);
        String advice =
                Fp32FallbackWarning.advice(
                        ModelPlan.of(PrecisionPolicy.parse("mixed_bfloat16"), model, b -> false),
                        share.getFp32Units());
        assertTrue(
                advice.startsWith(
                        "djl-amp read its code and stopped: its forward calls"
                                + " ai.djl.ndarray.NDArray.softmax. "),
                advice);
        assertTrue(advice.contains("LowPrecisionSafe"), advice);
    }

    /** Stands in for engine code the engine's own autocast runs (a TorchScript module). */
    private static final class EngineCode extends ai.djl.nn.AbstractBlock {
        @Override
        protected ai.djl.ndarray.NDList forwardInternal(
                ai.djl.training.ParameterStore store,
                ai.djl.ndarray.NDList inputs,
                boolean training,
                ai.djl.util.PairList<String, Object> params) {
            return io.github.djlamp.amp.policy.UnknownCode.same(inputs);
        }

        @Override
        public ai.djl.ndarray.types.Shape[] getOutputShapes(
                ai.djl.ndarray.types.Shape[] inputShapes) {
            return inputShapes;
        }
    }

    /**
     * A block of the user's own around engine code, planned under the engine's autocast, that ran
     * in fp32 because the engine refused (oneDNN's bf16 LSTM on this CPU): nothing to vouch for.
     */
    @Test
    void aBlockPlannedUnderTheEnginesAutocastIsToldNothingNeedsChanging() {
        SequentialBlock model = new SequentialBlock().add(new OwnForward(new EngineCode()));
        ModelPlan plan =
                ModelPlan.of(
                        PrecisionPolicy.parse("mixed_bfloat16"),
                        model,
                        b -> b instanceof EngineCode);
        assertEquals(
                io.github.djlamp.amp.policy.BlockPlan.Strategy.ENGINE_AUTOCAST,
                plan.get("01OwnForward").getStrategy());
        ArithmeticShare share = new ArithmeticShare(Precision.BF16);
        share.recordProduct("01OwnForward", "OwnForward", Precision.FP32, 9000);
        String advice = Fp32FallbackWarning.advice(plan, share.getFp32Units());
        assertTrue(advice.startsWith("Nothing to change"), advice);
    }
}
