package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDList;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.LayerNorm;
import java.util.List;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/**
 * Each block's treatment is decided once, in the plan, with the precision the policy computes in.
 */
class ModelPlanTest {

    private static final Predicate<Block> NORM_BY_ENGINE = block -> block instanceof LayerNorm;

    private static Block model() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(8).build())
                .add(new LambdaBlock(list -> new NDList(list.head().softmax(1))))
                .add(LayerNorm.builder().build())
                .add(
                        new ParallelBlock(
                                UnknownCode::first,
                                List.of(
                                        new SequentialBlock()
                                                .add(Linear.builder().setUnits(8).build())
                                                .add(Activation::relu))))
                .add(Linear.builder().setUnits(4).build());
    }

    @Test
    void theBlocksVisitedAreThePolicysResolution() {
        Block model = model();
        PrecisionPolicy policy = PrecisionPolicy.parse("mixed_bfloat16[path:05Linear=fp32]");
        ModelPlan plan = ModelPlan.of(policy, model, NORM_BY_ENGINE);
        assertEquals(policy.resolveAll(model), plan.getPolicyCategories());
        assertEquals(
                List.of(
                        "",
                        "01Linear",
                        "02LambdaBlock",
                        "03LayerNorm",
                        "04ParallelBlock",
                        "04ParallelBlock/01SequentialBlock",
                        "04ParallelBlock/01SequentialBlock/01Linear",
                        "04ParallelBlock/01SequentialBlock/02LambdaBlock",
                        "05Linear"),
                plan.getBlocks().stream().map(BlockPlan::getPath).toList());
        assertEquals(BlockPlan.Strategy.CONTAINER, plan.get("").getStrategy());
        assertEquals(CastCategory.FP32, plan.get("05Linear").getCategory());
        assertEquals("override", plan.get("05Linear").getReason());
        assertEquals(
                DefaultCastRules.reasonFor(LayerNorm.builder().build()),
                plan.get("03LayerNorm").getRuleReason());
    }

    @Test
    void theEngineAutocastTakesABlockOnlyIn16BitsAndNeverAgainstAnFp32Override() {
        Block model = model();
        BlockPlan bf16 =
                ModelPlan.of(PrecisionPolicy.mixedBfloat16(), model, NORM_BY_ENGINE)
                        .get("03LayerNorm");
        assertEquals(BlockPlan.Strategy.ENGINE_AUTOCAST, bf16.getStrategy());
        assertEquals(CastCategory.LOW, bf16.getCategory());
        assertEquals(CastCategory.FP32, bf16.getPolicyCategory());
        assertEquals(DefaultCastRules.ENGINE_AUTOCAST_REASON, bf16.getReason());

        BlockPlan fp32 =
                ModelPlan.of(PrecisionPolicy.float32(), model, NORM_BY_ENGINE).get("03LayerNorm");
        assertEquals(BlockPlan.Strategy.STAGE, fp32.getStrategy());
        assertEquals(CastCategory.FP32, fp32.getCategory());

        BlockPlan kept =
                ModelPlan.of(
                                PrecisionPolicy.parse("mixed_bfloat16[path:03LayerNorm=fp32]"),
                                model,
                                NORM_BY_ENGINE)
                        .get("03LayerNorm");
        assertEquals(BlockPlan.Strategy.STAGE, kept.getStrategy());
        assertEquals(CastCategory.FP32, kept.getCategory());
        assertEquals("override", kept.getReason());
    }

    @Test
    void joinsAndHazardsAreDecidedForBf16Only() {
        Block model = model();
        String lowLambda = "[path:02LambdaBlock=low]";
        ModelPlan bf16 =
                ModelPlan.of(
                        PrecisionPolicy.parse("mixed_bfloat16" + lowLambda), model, b -> false);
        assertTrue(bf16.get("04ParallelBlock").hasFp32Join());
        assertNotNull(bf16.get("02LambdaBlock").getBf16Hazard());
        assertNull(bf16.get("01Linear").getBf16Hazard());

        ModelPlan fp16 =
                ModelPlan.of(PrecisionPolicy.parse("mixed_float16" + lowLambda), model, b -> false);
        assertFalse(fp16.get("04ParallelBlock").hasFp32Join());
        assertNull(fp16.get("02LambdaBlock").getBf16Hazard());
    }

    @Test
    void anAutoPlanDecidesNothingThatNeedsThePrecision() {
        ModelPlan auto = ModelPlan.of(PrecisionPolicy.auto(), model(), NORM_BY_ENGINE);
        assertEquals(BlockPlan.Strategy.STAGE, auto.get("03LayerNorm").getStrategy());
        assertFalse(auto.get("04ParallelBlock").hasFp32Join());
        for (BlockPlan planned : auto.getBlocks()) {
            assertNull(planned.getBf16Hazard(), planned.toString());
        }
    }

    /** A block of the user's own whose author vouches for it. */
    static final class Marked extends LambdaBlock implements LowPrecisionSafe {
        Marked() {
            super(list -> UnknownCode.same(list));
        }
    }

    @Test
    void aBf16UnitListsTheBlocksInsideItComputingOnSomeonesWord() {
        Block unit =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(8).build())
                        .add(new Marked())
                        .add(new LambdaBlock(list -> UnknownCode.same(list)));
        Block model = new SequentialBlock().add(unit).add(Linear.builder().setUnits(4).build());
        String overrides =
                "[path:01SequentialBlock=low,path:01SequentialBlock/03LambdaBlock=trusted]";
        ModelPlan bf16 =
                ModelPlan.of(
                        PrecisionPolicy.parse("mixed_bfloat16" + overrides), model, b -> false);
        assertEquals(
                List.of("01SequentialBlock/02Marked", "01SequentialBlock/03LambdaBlock"),
                List.copyOf(bf16.get("01SequentialBlock").getVouchedFor().keySet()));
        assertTrue(bf16.get("02Linear").getVouchedFor().isEmpty());
        // fp16 has no JVM-ending trap: nothing to vouch for
        ModelPlan fp16 =
                ModelPlan.of(PrecisionPolicy.parse("mixed_float16" + overrides), model, b -> false);
        assertTrue(fp16.get("01SequentialBlock").getVouchedFor().isEmpty());
    }
}
