package io.github.djlamp.amp.cast;

import ai.djl.nn.Block;
import io.github.djlamp.amp.cast.strategy.AttentionShadow;
import io.github.djlamp.amp.compile.GraphPlan;
import io.github.djlamp.amp.policy.BlockPlan;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.verify.KernelVerdict;
import java.util.Map;

/**
 * A compiled graph's plan as the eager shadow tree runs it: the model plan's categories, for each
 * 16-bit layer what its stage's last kernel check decided (none checked: 16 bits in the wrapper's
 * layout), and for each attention whether its last forward ran its products in 16 bits.
 */
final class DecidedGraphPlan implements GraphPlan {

    private final ModelPlan plan;
    private final Map<String, PrecisionStage> stages;
    private final Map<String, AttentionShadow> attentions;
    private final MemoryLayout lowLayout;

    /**
     * Makes the plan.
     *
     * @param stages the shadow tree's stages by path, filled as the tree is built
     * @param attentions the shadow tree's attention blocks by path, filled likewise
     */
    DecidedGraphPlan(
            ModelPlan plan,
            Map<String, PrecisionStage> stages,
            Map<String, AttentionShadow> attentions,
            MemoryLayout lowLayout) {
        this.plan = plan;
        this.stages = stages;
        this.attentions = attentions;
        this.lowLayout = lowLayout;
    }

    @Override
    public CastCategory categoryOf(String path, Block block) {
        BlockPlan planned = plan.get(path);
        if (planned == null || planned.getBlock() != block) {
            return null;
        }
        return switch (planned.getStrategy()) {
            case STAGE -> planned.getCategory();
            case CONTAINER, COMPOSITE -> CastCategory.CONTAINER;
            default -> null;
        };
    }

    @Override
    public boolean fp32Join(String path) {
        BlockPlan planned = plan.get(path);
        return planned != null && planned.hasFp32Join();
    }

    @Override
    public boolean runsLow(String path) {
        KernelVerdict verdict = verdict(path);
        return verdict == null || verdict.runsLowPrecision();
    }

    @Override
    public boolean channelsLast(String path) {
        KernelVerdict verdict = verdict(path);
        MemoryLayout layout = verdict == null ? lowLayout : verdict.getLayout();
        return layout == MemoryLayout.CHANNELS_LAST;
    }

    @Override
    public boolean lowProducts(String path) {
        BlockPlan planned = plan.get(path);
        return planned != null && planned.hasLowProducts();
    }

    @Override
    public boolean productRunsLow(String path, AttentionProduct product) {
        AttentionShadow attention = attentions.get(path);
        return attention == null || attention.ranLow(product);
    }

    @Override
    public UnitCast unitCast(String path) {
        KernelVerdict verdict = verdict(path);
        if (verdict != null && !verdict.runsLowPrecision()) {
            return new UnitCast(false, Layout.AS_IT_IS, false);
        }
        MemoryLayout layout = verdict == null ? lowLayout : verdict.getLayout();
        return new UnitCast(
                true,
                switch (layout) {
                    case CHANNELS_LAST -> Layout.CHANNELS_LAST;
                    case CONTIGUOUS -> Layout.CONTIGUOUS;
                    case PRESERVE -> Layout.AS_IT_IS;
                },
                // a stage given another layout than the wrapper's casts even 16-bit inputs
                verdict != null && layout != lowLayout);
    }

    private KernelVerdict verdict(String path) {
        PrecisionStage stage = stages.get(path);
        return stage == null ? null : stage.lastVerdict();
    }
}
