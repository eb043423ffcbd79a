package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.BlockPlan;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.LowPrecisionSafe;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Which units of a bf16 model leave a breadcrumb before their first forward (those that compute in
 * 16 bits on someone's word, never DJL's blocks djl-amp's rules know) and what the line says.
 */
class TrustBreadcrumbTest {

    /** A user's block djl-amp cannot look into. */
    abstract static class UserBlock extends AbstractBlock {
        UserBlock() {
            addChildBlock("inner", Linear.builder().setUnits(4).build());
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            return io.github.djlamp.amp.policy.UnknownCode.same(inputs); // code djl-amp cannot read
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return inputShapes;
        }
    }

    /** Not declared safe by its author. */
    static final class Opaque extends UserBlock {}

    /** Declared safe by its author. */
    static final class Marked extends UserBlock implements LowPrecisionSafe {}

    /** A subclass of DJL's Linear marked safe: djl-amp's rules run it in 16 bits anyway. */
    static final class MarkedLinear extends Linear implements LowPrecisionSafe {
        MarkedLinear() {
            super(Linear.builder().setUnits(4));
        }
    }

    private static Block around(Block userBlock) {
        return new SequentialBlock()
                .add(Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(4).build())
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(userBlock)
                .add(Linear.builder().setUnits(2).build());
    }

    /** The breadcrumbs of the units a policy gives the model, by unit path. */
    private static List<String> breadcrumbs(Block model, PrecisionPolicy policy) {
        List<String> lines = new ArrayList<>();
        for (BlockPlan planned : ModelPlan.of(policy, model, block -> false).getBlocks()) {
            TrustBreadcrumb breadcrumb =
                    planned.isUnit() ? TrustBreadcrumb.of(planned, policy) : null;
            if (breadcrumb != null) {
                lines.add(breadcrumb.message(Device.cpu()));
            }
        }
        return lines;
    }

    @Test
    void aMarkedBlockLeavesOneLineNamingItsPathClassVoucherAndFix() {
        List<String> lines = breadcrumbs(around(new Marked()), PrecisionPolicy.mixedBfloat16());
        assertEquals(1, lines.size(), lines.toString());
        String line = lines.get(0);
        String name = Marked.class.getName();
        assertTrue(line.startsWith("djl-amp: first bfloat16 forward on cpu() of '04Marked'"), line);
        assertTrue(line.contains("(" + name + ")"), line);
        assertTrue(line.contains("on the word of its author (LowPrecisionSafe)"), line);
        assertTrue(line.contains("\"terminate called without an active exception\""), line);
        assertTrue(line.contains("softmax or logSoftmax"), line);
        assertTrue(line.contains("getDataType()"), line);
        assertTrue(line.contains("class:" + name + "=fp32 or path:04Marked=fp32"), line);
        assertTrue(line.contains("AmpBackend.cast"), line);
    }

    @ParameterizedTest
    @ValueSource(strings = {"class", "path", "builder"})
    void aBlockThePolicyTrustsNamesTheOverride(String how) {
        String name = Opaque.class.getName();
        PrecisionPolicy policy =
                switch (how) {
                    case "class" ->
                            PrecisionPolicy.parse("mixed_bfloat16[class:" + name + "=trusted]");
                    case "path" -> PrecisionPolicy.parse("mixed_bfloat16[path:04Opaque=trusted]");
                    default ->
                            PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                                    .trust(Opaque.class)
                                    .build();
                };
        List<String> lines = breadcrumbs(around(new Opaque()), policy);
        assertEquals(1, lines.size(), lines.toString());
        String override =
                "path".equals(how) ? "path:04Opaque=trusted" : "class:" + name + "=trusted";
        assertTrue(
                lines.get(0).contains("on the word of the policy (" + override + ")"),
                lines.get(0));
    }

    @Test
    void djlBlocksTheRulesKnowLeaveNone() {
        assertEquals(
                List.of(),
                breadcrumbs(
                        around(Linear.builder().setUnits(3).build()),
                        PrecisionPolicy.mixedBfloat16()));
        assertEquals(
                List.of(),
                breadcrumbs(around(new MarkedLinear()), PrecisionPolicy.mixedBfloat16()),
                "a subclass of Linear runs in 16 bits on djl-amp's rules, marked or not");
    }

    @ParameterizedTest
    @ValueSource(strings = {"mixed_float16", "float32", "mixed_bfloat16[class:%s=fp32]"})
    void noneUnlessTheBlockComputesInBf16(String text) {
        PrecisionPolicy policy = PrecisionPolicy.parse(String.format(text, Marked.class.getName()));
        assertEquals(List.of(), breadcrumbs(around(new Marked()), policy), policy.toString());
    }

    @Test
    void aUnitHoldingVouchedBlocksNamesEachAndTheUnitToKeepInFp32() {
        Block unit = new SequentialBlock().add(new Marked()).add(new Opaque());
        Block model = new SequentialBlock().add(unit).add(Linear.builder().setUnits(2).build());
        PrecisionPolicy policy =
                PrecisionPolicy.parse(
                        "mixed_bfloat16[path:01SequentialBlock=low,class:"
                                + Opaque.class.getName()
                                + "=trusted]");
        List<String> lines = breadcrumbs(model, policy);
        assertEquals(1, lines.size(), lines.toString());
        String line = lines.get(0);
        assertTrue(line.contains("of '01SequentialBlock' (ai.djl.nn.SequentialBlock)"), line);
        assertTrue(
                line.contains(
                        "for '01SequentialBlock/01Marked' ("
                                + Marked.class.getName()
                                + ") by its author (LowPrecisionSafe)"),
                line);
        assertTrue(line.contains("for '01SequentialBlock/02Opaque' ("), line);
        assertTrue(line.contains("by the policy (class:" + Opaque.class.getName()), line);
        assertTrue(
                line.contains("keep '01SequentialBlock' in fp32 with path:01SequentialBlock=fp32"),
                line);
    }

    @Test
    void aPassThroughUnitOfAVouchedBlockHasOneToo() {
        Block model = around(new Marked());
        PrecisionPolicy policy =
                PrecisionPolicy.parse(
                        "mixed_bfloat16[class:" + Marked.class.getName() + "=pass_through]");
        BlockPlan planned = ModelPlan.of(policy, model, block -> false).get("04Marked");
        assertEquals(CastCategory.PASS_THROUGH, planned.getCategory());
        TrustBreadcrumb breadcrumb = TrustBreadcrumb.of(planned, policy);
        assertNotNull(breadcrumb);
        assertEquals(1, breadcrumb.vouched().size());
        PrecisionPolicy fp32 =
                PrecisionPolicy.parse("mixed_bfloat16[class:" + Marked.class.getName() + "=fp32]");
        assertNull(
                TrustBreadcrumb.of(
                        ModelPlan.of(fp32, model, block -> false).get("04Marked"), fp32));
    }

    @Test
    void theShadowTreeGivesTheLineToTheStageOfTheVouchedBlockOnly() {
        Block model = around(new Marked());
        Block shadow =
                ShadowTree.build(model, PrecisionPolicy.mixedBfloat16(), IntermediateRelease.OFF);
        Map<String, Block> stages = BlockPaths.walk(shadow);
        List<String> pending = new ArrayList<>();
        for (Block block : stages.values()) {
            if (block instanceof PrecisionStage stage && stage.hasPendingBreadcrumb()) {
                pending.add(stage.toString());
            }
        }
        assertEquals(List.of("low(04Marked)"), pending);
    }
}
