package io.github.djlamp.amp.policy;

import ai.djl.nn.Block;
import java.util.Map;

/**
 * The treatment djl-amp gives one block of a wrapped tree under one policy, decided once by {@link
 * ModelPlan} and read by everything that acts on it or reports it: the shadow tree that runs it,
 * the precision summary, the policy's validation, the bf16 hazard check and the fallback WARN. It
 * records what was decided, never how to decide it again.
 */
public final class BlockPlan {

    /** How the wrapper runs a block. */
    public enum Strategy {
        /** As one unit in its category ({@link #getCategory()}): cast inputs, 16-bit weights. */
        STAGE,
        /**
         * As one unit under the engine's own autocast (a TorchScript module, DJL's LSTM or RNN),
         * its outputs cast to fp32 at its boundary.
         */
        ENGINE_AUTOCAST,
        /** A SequentialBlock or ParallelBlock: each child has a plan of its own. */
        CONTAINER,
        /**
         * A DJL block with a forward of its own that djl-amp runs layer by layer ({@link
         * KnownComposites}): each child has a plan of its own.
         */
        COMPOSITE,
        /**
         * A block whose forward djl-amp read as safe ({@link ReadableBlocks}), holding a child that
         * is not safe in 16 bits: its own code runs over its children's shadows, each child with a
         * plan of its own ({@link DefaultCastRules#isReadOverChildren}).
         */
        READ
    }

    private final String path;
    private final Block block;
    private final Strategy strategy;
    private final CastCategory policyCategory;
    private final CastCategory category;
    private final String reason;
    private final String ruleReason;
    private final String bf16Hazard;
    private final boolean fp32Join;
    private final boolean lowProducts;
    private final Map<String, Block> vouchedFor;

    BlockPlan(
            String path,
            Block block,
            Strategy strategy,
            CastCategory policyCategory,
            CastCategory category,
            String reason,
            String ruleReason,
            String bf16Hazard,
            boolean fp32Join,
            boolean lowProducts,
            Map<String, Block> vouchedFor) {
        this.path = path;
        this.block = block;
        this.strategy = strategy;
        this.policyCategory = policyCategory;
        this.category = category;
        this.reason = reason;
        this.ruleReason = ruleReason;
        this.bf16Hazard = bf16Hazard;
        this.fp32Join = fp32Join;
        this.lowProducts = lowProducts;
        this.vouchedFor = vouchedFor;
    }

    /**
     * Returns the block's path from the root, as {@link BlockPaths} writes it.
     *
     * @return the path, empty for the root
     */
    public String getPath() {
        return path;
    }

    /**
     * Returns the block.
     *
     * @return the block of the user's tree
     */
    public Block getBlock() {
        return block;
    }

    /**
     * Returns how the wrapper runs the block.
     *
     * @return the strategy
     */
    public Strategy getStrategy() {
        return strategy;
    }

    /**
     * Returns whether the block runs as one unit (a stage of the shadow tree), not through its
     * children's plans.
     *
     * @return true for {@link Strategy#STAGE} and {@link Strategy#ENGINE_AUTOCAST}
     */
    public boolean isUnit() {
        return strategy == Strategy.STAGE || strategy == Strategy.ENGINE_AUTOCAST;
    }

    /**
     * Returns the category the policy gives the block ({@link PrecisionPolicy#categoryOf}), before
     * the engine's autocast takes a block over.
     *
     * @return the policy's category
     */
    public CastCategory getPolicyCategory() {
        return policyCategory;
    }

    /**
     * Returns what the unit computes in: {@link CastCategory#LOW} (the policy's 16-bit precision;
     * under the engine's autocast, each operation in the precision autocast gives it), {@link
     * CastCategory#FP32} or {@link CastCategory#PASS_THROUGH}; {@link CastCategory#CONTAINER} for a
     * container or composite. A kernel check may still run a LOW layer in fp32 at run time.
     *
     * @return the category the unit runs in
     */
    public CastCategory getCategory() {
        return category;
    }

    /**
     * Returns why the block has its category, as the precision summary shows it: {@code
     * "override"}, the engine autocast's reason, or the default rule's.
     *
     * @return the reason
     */
    public String getReason() {
        return reason;
    }

    /**
     * Returns the reason of the default rule that matches the block ({@link
     * DefaultCastRules#reasonFor}), whatever an override or the engine decided.
     *
     * @return the default rule's reason
     */
    public String getRuleReason() {
        return ruleReason;
    }

    /**
     * Returns what makes running this unit in bf16 unsafe ({@link DefaultCastRules#bf16HazardIn}),
     * for a unit the policy runs in bf16 outside the engine's autocast.
     *
     * @return the first hazard found, or null when there is none or the question does not arise
     */
    public String getBf16Hazard() {
        return bf16Hazard;
    }

    /**
     * Returns whether a ParallelBlock's join sees fp32 branch outputs: under bf16, a join of
     * unknown content may call softmax or build arrays of its input's data type.
     *
     * @return true when the branches' outputs are cast to fp32 before the join
     */
    public boolean hasFp32Join() {
        return fp32Join;
    }

    /**
     * Returns whether an attention block's two matrix products compute in 16 bits: as its query
     * projection does under the policy.
     *
     * @return true when they do; false for every other block
     */
    public boolean hasLowProducts() {
        return lowProducts;
    }

    /**
     * Returns the blocks of this unit, itself included, that compute in bf16 on someone's word and
     * that djl-amp's own rules would keep in fp32: a block its author marked {@link
     * LowPrecisionSafe}, one the policy trusts ({@code class:X=trusted}). djl-amp cannot check that
     * word, so the unit's stage logs a line naming them before its first bf16 forward.
     *
     * @return an unmodifiable map from path to block, in tree order; empty where the unit does not
     *     compute in bf16 as one stage, or everything in it is a block djl-amp's rules know
     */
    public Map<String, Block> getVouchedFor() {
        return vouchedFor;
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return (path.isEmpty() ? "(root)" : path)
                + ": "
                + strategy
                + " "
                + category
                + " ("
                + reason
                + ")";
    }
}
