package io.github.djlamp.amp.policy;

import ai.djl.nn.Block;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.util.Pair;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

/**
 * The {@link BlockPlan} of every block djl-amp visits in one tree under one policy: the root and,
 * below each container or known composite, its children; blocks inside a unit are not visited,
 * since the unit runs as a whole. Made once where a block is wrapped (and for each device's
 * concrete policy under {@code auto}), and read by the shadow tree, the precision summary, the
 * policy's validation and the fallback WARN, so that none of them decides a block's treatment again
 * and they cannot disagree.
 */
public final class ModelPlan {

    private final PrecisionPolicy policy;
    private final Block root;
    private final Map<String, BlockPlan> byPath;

    private ModelPlan(PrecisionPolicy policy, Block root, Map<String, BlockPlan> byPath) {
        this.policy = policy;
        this.root = root;
        this.byPath = byPath;
    }

    /**
     * Plans every block djl-amp visits in {@code root}'s tree under {@code policy}. Under {@code
     * auto} the decisions that need the compute precision (the engine's autocast, the bf16 hazards,
     * fp32 joins, the attention products) are not made: such a plan serves the policy's validation,
     * and each device gets the plan of its concrete policy.
     *
     * @param policy the policy
     * @param root the root of the model's block tree
     * @param engineAutocast which blocks an engine's own autocast runs whole ({@code
     *     spi.AmpBackends.supportEngineAutocast}): the policy stays engine-agnostic
     * @return the plan
     */
    public static ModelPlan of(
            PrecisionPolicy policy, Block root, Predicate<Block> engineAutocast) {
        Precision precision = policy.isAuto() ? null : policy.getComputePrecision();
        Map<String, BlockPlan> plans = new LinkedHashMap<>();
        visit(policy, precision, engineAutocast, "", root, plans);
        return new ModelPlan(policy, root, Collections.unmodifiableMap(plans));
    }

    private static void visit(
            PrecisionPolicy policy,
            Precision precision,
            Predicate<Block> engineAutocast,
            String path,
            Block block,
            Map<String, BlockPlan> out) {
        BlockPlan plan = planOf(policy, precision, engineAutocast, path, block);
        out.put(path, plan);
        if (!plan.isUnit()) {
            for (Pair<String, Block> child : block.getChildren()) {
                visit(
                        policy,
                        precision,
                        engineAutocast,
                        BlockPaths.child(path, child.getKey()),
                        child.getValue(),
                        out);
            }
        }
    }

    private static BlockPlan planOf(
            PrecisionPolicy policy,
            Precision precision,
            Predicate<Block> engineAutocast,
            String path,
            Block block) {
        CastCategory category = policy.categoryOf(block, path);
        String ruleReason = DefaultCastRules.reasonFor(block);
        boolean read =
                category == CastCategory.CONTAINER && DefaultCastRules.isReadOverChildren(block);
        // around engine code the engine's autocast runs a readable block whole, as before
        if (category == CastCategory.CONTAINER
                && !(read
                        && runsUnderEngineAutocast(
                                block, path, category, policy, precision, engineAutocast))) {
            boolean composite = KnownComposites.isMirrored(block);
            boolean fp32Join =
                    block instanceof ParallelBlock
                            && precision == Precision.BF16
                            && !DefaultCastRules.hasKnownJoin((ParallelBlock) block);
            boolean lowProducts =
                    precision != null
                            && composite
                            && block instanceof ScaledDotProductAttentionBlock
                            && queryProjectionIsLow(block, path, policy);
            return new BlockPlan(
                    path,
                    block,
                    composite
                            ? BlockPlan.Strategy.COMPOSITE
                            : read ? BlockPlan.Strategy.READ : BlockPlan.Strategy.CONTAINER,
                    category,
                    category,
                    ruleReason,
                    ruleReason,
                    null,
                    fp32Join,
                    lowProducts,
                    Map.of());
        }
        if (runsUnderEngineAutocast(block, path, category, policy, precision, engineAutocast)) {
            return new BlockPlan(
                    path,
                    block,
                    BlockPlan.Strategy.ENGINE_AUTOCAST,
                    category,
                    CastCategory.LOW,
                    policy.autocasts(block, path)
                            ? "override: the engine's autocast runs it whole"
                            : engineAutocast.test(block)
                                    ? DefaultCastRules.ENGINE_AUTOCAST_REASON
                                    : DefaultCastRules.READ_AROUND_ENGINE_CODE_REASON,
                    ruleReason,
                    null,
                    false,
                    false,
                    Map.of());
        }
        boolean overridden =
                category != PrecisionPolicy.named(policy.getName()).categoryOf(block, null)
                        || policy.getPathOverrides().containsKey(path);
        String hazard =
                precision == Precision.BF16 && category != CastCategory.FP32
                        ? DefaultCastRules.bf16HazardIn(block, path, policy::trusts)
                        : null;
        return new BlockPlan(
                path,
                block,
                BlockPlan.Strategy.STAGE,
                category,
                category,
                overridden ? "override" : ruleReason,
                ruleReason,
                hazard,
                false,
                false,
                precision == Precision.BF16 && category != CastCategory.FP32
                        ? vouchedIn(block, path, policy)
                        : Map.of());
    }

    /**
     * The blocks of a bf16 unit, itself included, that compute in 16 bits on someone's word and
     * that djl-amp's own rules would keep in fp32 ({@link BlockPlan#getVouchedFor()}).
     */
    private static Map<String, Block> vouchedIn(Block unit, String path, PrecisionPolicy policy) {
        Map<String, Block> vouched = new LinkedHashMap<>();
        collectVouched(unit, path, policy, vouched);
        return vouched.isEmpty() ? Map.of() : Collections.unmodifiableMap(vouched);
    }

    private static void collectVouched(
            Block block, String path, PrecisionPolicy policy, Map<String, Block> into) {
        if (!DefaultCastRules.knowsSafeIn16Bits(block)
                && (policy.trusts(block, path) || block instanceof LowPrecisionSafe)) {
            into.put(path, block);
        }
        for (Pair<String, Block> child : block.getChildren()) {
            collectVouched(child.getValue(), BlockPaths.child(path, child.getKey()), policy, into);
        }
    }

    /**
     * Whether the engine's autocast runs {@code block}: the policy computes in 16 bits, no override
     * keeps it fp32, and the engine says its autocast runs it.
     */
    private static boolean runsUnderEngineAutocast(
            Block block,
            String path,
            CastCategory category,
            PrecisionPolicy policy,
            Precision precision,
            Predicate<Block> engineAutocast) {
        if (precision == null || !precision.isReduced()) {
            return false;
        }
        if (policy.autocasts(block, path)) {
            return true; // the user's override
        }
        if (category == CastCategory.FP32 && policy.overrides(block, path)) {
            return false; // the user's fp32 override wins
        }
        return engineAutocast.test(block)
                || DefaultCastRules.isReadableAroundEngineCode(block, engineAutocast);
    }

    /** Whether an attention block's query projection computes in 16 bits under the policy. */
    private static boolean queryProjectionIsLow(Block block, String path, PrecisionPolicy policy) {
        for (Pair<String, Block> child : block.getChildren()) {
            if ("queryProjection".equals(child.getKey().replaceFirst("^[0-9]+", ""))) {
                return policy.categoryOf(child.getValue(), BlockPaths.child(path, child.getKey()))
                        == CastCategory.LOW;
            }
        }
        return false;
    }

    /**
     * Returns the policy the plan was made under.
     *
     * @return the policy
     */
    public PrecisionPolicy getPolicy() {
        return policy;
    }

    /**
     * Returns the root of the planned tree.
     *
     * @return the root block
     */
    public Block getRoot() {
        return root;
    }

    /**
     * Returns the plan of the block at {@code path}.
     *
     * @param path a block path as {@link BlockPaths} writes it
     * @return the plan, or null when djl-amp does not visit that block (it lies inside a unit, or
     *     is not in the tree)
     */
    public BlockPlan get(String path) {
        return byPath.get(path);
    }

    /**
     * Returns the plans of every visited block, in depth-first pre-order.
     *
     * @return the plans
     */
    public List<BlockPlan> getBlocks() {
        return new ArrayList<>(byPath.values());
    }

    /**
     * Returns the policy's category of every visited block, as {@link
     * PrecisionPolicy#resolveAll(Block)} gives it.
     *
     * @return an unmodifiable map from path to category, in depth-first pre-order
     */
    public Map<String, CastCategory> getPolicyCategories() {
        Map<String, CastCategory> categories = new LinkedHashMap<>();
        for (BlockPlan plan : byPath.values()) {
            categories.put(plan.getPath(), plan.getPolicyCategory());
        }
        return Collections.unmodifiableMap(categories);
    }

    /**
     * Checks that every override of the policy applies to the planned tree, as {@link
     * PrecisionPolicy#validateAgainst(Block)} does.
     *
     * @throws IllegalArgumentException when a path override names no block in the tree or a block
     *     inside a unit, or a class override matches no block in the tree
     */
    public void validateOverrides() {
        PolicyValidation.validate(this);
    }
}
