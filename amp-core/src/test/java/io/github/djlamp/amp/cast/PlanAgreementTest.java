package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
import io.github.djlamp.amp.cast.checkpoint.CheckpointPlan;
import io.github.djlamp.amp.cast.strategy.AttentionShadow;
import io.github.djlamp.amp.cast.strategy.AutocastStage;
import io.github.djlamp.amp.cast.strategy.MirroredComposite;
import io.github.djlamp.amp.policy.BlockPlan;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.DefaultCastRules;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The precision summary and the shadow tree read one plan per block ({@link ModelPlan}): for a
 * model with a known composite, lambdas, blocks of the user's own, a join of unknown content,
 * overrides and a block the engine's autocast runs, every row of the summary is what a stage of the
 * built shadow tree runs, and every stage has its row.
 */
class PlanAgreementTest {

    /** A block of the user's own that hands its input on; each kind below is a class of its own. */
    abstract static class Identity extends AbstractBlock {
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

    /** A block of the user's own with a forward djl-amp cannot see: fp32 by default. */
    static final class Opaque extends Identity {}

    /** A block the (test's) engine runs under its own autocast. */
    static final class EngineCode extends Identity {}

    /** A block of the user's own the policy trusts. */
    static final class Vouched extends Identity {}

    private static Block model() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(8).build())
                .add(Activation::relu)
                .add(new LambdaBlock(list -> new NDList(list.head().softmax(1))))
                .add(new TransformerEncoderBlock(8, 2, 16, 0.0f, Activation::relu))
                .add(new Opaque())
                .add(new EngineCode())
                .add(new Vouched())
                .add(
                        new ParallelBlock(
                                io.github.djlamp.amp.policy.UnknownCode::first,
                                List.of(
                                        Linear.builder().setUnits(8).build(),
                                        Linear.builder().setUnits(8).build())))
                .add(Linear.builder().setUnits(4).build());
    }

    private static final String POLICY =
            "mixed_bfloat16[path:09Linear=fp32,class:" + Vouched.class.getName() + "=trusted]";

    @Test
    void everyRowOfTheSummaryIsWhatAStageOfTheShadowTreeRuns() {
        for (String name : List.of(POLICY, "mixed_float16", "float32")) {
            PrecisionPolicy policy = PrecisionPolicy.parse(name);
            ModelPlan plan = ModelPlan.of(policy, model(), block -> block instanceof EngineCode);
            PrecisionSummary summary = PrecisionSummary.of(plan, List.of(), CheckpointPlan.NONE);
            Block shadow =
                    ShadowTree.build(plan, IntermediateRelease.OFF, CheckpointPlan.NONE, null);

            Map<String, String> rows = new LinkedHashMap<>();
            for (PrecisionSummary.Row row : summary.getRows()) {
                String path = row.getPath().isEmpty() ? "root" : row.getPath();
                boolean engine = DefaultCastRules.ENGINE_AUTOCAST_REASON.equals(row.getReason());
                rows.put(path, (engine ? "engine_autocast " : "") + row.getCategory());
            }
            assertEquals(rows, ranByStages(shadow), name + "\n" + summary);
        }
    }

    @Test
    void theModelHasEveryKindOfTreatment() {
        ModelPlan plan =
                ModelPlan.of(
                        PrecisionPolicy.parse(POLICY),
                        model(),
                        block -> block instanceof EngineCode);
        PrecisionSummary summary = PrecisionSummary.of(plan, List.of(), CheckpointPlan.NONE);
        Map<String, String> reasons = new LinkedHashMap<>();
        for (PrecisionSummary.Row row : summary.getRows()) {
            reasons.put(row.getPath(), row.getReason());
        }
        assertEquals(
                BlockPlan.Strategy.COMPOSITE, plan.get("04TransformerEncoderBlock").getStrategy());
        assertEquals(BlockPlan.Strategy.ENGINE_AUTOCAST, plan.get("06EngineCode").getStrategy());
        assertEquals(CastCategory.LOW, plan.get("07Vouched").getCategory());
        assertEquals("override", reasons.get("09Linear"));
        assertEquals("override", reasons.get("07Vouched"));
        assertEquals(DefaultCastRules.ENGINE_AUTOCAST_REASON, reasons.get("06EngineCode"));
        assertEquals(DefaultCastRules.reasonFor(new Opaque()), reasons.get("05Opaque"));
        assertTrue(reasons.get("03LambdaBlock").contains("unknown content"), reasons.toString());
        assertTrue(reasons.containsKey("08ParallelBlock (join)"), reasons.toString());
        assertTrue(
                reasons.containsKey(
                        "04TransformerEncoderBlock/01selfAttention (attention products)"),
                reasons.toString());
        // every row's reason is its block's plan's
        for (BlockPlan planned : plan.getBlocks()) {
            if (planned.isUnit()) {
                assertEquals(
                        planned.getReason(), reasons.get(planned.getPath()), planned.toString());
            }
        }
    }

    /**
     * What the stages of a shadow tree run, by the path of the unit: a {@link PrecisionStage}'s
     * category, an {@link AutocastStage}, the fp32 casts before a join, and an attention block's
     * products, read from the built blocks (the shadows of composites keep their children's shadows
     * in fields).
     */
    private static Map<String, String> ranByStages(Block shadow) {
        Map<String, String> ran = new LinkedHashMap<>();
        collect(shadow, ran, Collections.newSetFromMap(new IdentityHashMap<>()));
        return ran;
    }

    private static void collect(Object node, Map<String, String> ran, Set<Object> seen) {
        if (node == null || !seen.add(node)) {
            return;
        }
        if (node instanceof PrecisionStage || node instanceof AutocastStage) {
            String text = node.toString(); // category(path)
            int open = text.indexOf('(');
            String kind = text.substring(0, open);
            String path = text.substring(open + 1, text.length() - 1);
            if (path.endsWith(" (join input)")) {
                ran.put(path.replace(" (join input)", " (join)"), kind(kind));
            } else {
                ran.put(path, kind(kind));
            }
            return;
        }
        if (node instanceof AttentionShadow) {
            String path = (String) field(node, "path");
            boolean low = (Boolean) field(node, "lowProducts");
            ran.put(
                    (path.isEmpty() ? "" : path + " ") + "(attention products)",
                    low ? "LOW" : "FP32");
        }
        if (!node.getClass()
                .getPackageName()
                .startsWith(PlanAgreementTest.class.getPackageName())) {
            return; // a block of the user's, not a shadow (they live in cast and its packages)
        }
        if (node instanceof Block block && !(node instanceof MirroredComposite)) {
            for (Block child : block.getChildren().values()) {
                collect(child, ran, seen);
            }
        }
        for (Class<?> c = node.getClass(); c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (f.getName().equals("inner")
                        || java.lang.reflect.Modifier.isStatic(f.getModifiers())) {
                    continue;
                }
                if (Block.class.isAssignableFrom(f.getType())
                        || List.class.isAssignableFrom(f.getType())) {
                    Object value = field(node, c, f.getName());
                    if (value instanceof List<?> list) {
                        for (Object item : new ArrayList<>(list)) {
                            if (item instanceof Block) {
                                collect(item, ran, seen);
                            }
                        }
                    } else {
                        collect(value, ran, seen);
                    }
                }
            }
        }
    }

    private static String kind(String stageKind) {
        return switch (stageKind) {
            case "engine_autocast" -> "engine_autocast LOW";
            case "low" -> "LOW";
            case "fp32" -> "FP32";
            case "pass_through" -> "PASS_THROUGH";
            default -> throw new AssertionError("a stage of kind " + stageKind);
        };
    }

    private static Object field(Object node, String name) {
        for (Class<?> c = node.getClass(); c != Object.class; c = c.getSuperclass()) {
            try {
                return field(node, c, name);
            } catch (IllegalStateException e) {
                // look in the superclass
            }
        }
        throw new AssertionError(node.getClass() + " has no field " + name);
    }

    private static Object field(Object node, Class<?> c, String name) {
        try {
            Field f = c.getDeclaredField(name);
            f.setAccessible(true);
            return f.get(node);
        } catch (NoSuchFieldException | IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }
}
