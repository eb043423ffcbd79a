package io.github.djlamp.amp.train;

import ai.djl.training.optimizer.AdamW;
import ai.djl.training.optimizer.Optimizer;
import java.util.List;

/**
 * DJL's {@link AdamW} fused (kernel {@code adamw}, Adam's settings and moments, {@link FusedAdam}):
 * DJL's AdamW decays the weight by {@code lr wd w} before Adam's update, with no L2 term in the
 * gradient, which PyTorch's own AdamW ({@code lr_t wd w}) does not: the kernel decays with a device
 * multiply, then runs {@code _fused_adam_} without decay. Its buffers are DJL's {@code AdamW.means}
 * and {@code AdamW.variances}.
 */
final class FusedAdamW implements FusedOptimizerKind {

    /** {@inheritDoc} */
    @Override
    public Class<? extends Optimizer> optimizerClass() {
        return AdamW.class;
    }

    /** {@inheritDoc} */
    @Override
    public int stateFileCode() {
        return 3;
    }

    /** {@inheritDoc} */
    @Override
    public String describe(int buffersPerParameter) {
        return "AdamW";
    }

    /** {@inheritDoc} */
    @Override
    public List<String> stateFields(Optimizer optimizer) {
        return FusedAdam.MOMENTS;
    }

    /** {@inheritDoc} */
    @Override
    public Kernel kernel(Optimizer optimizer) {
        return new Kernel("adamw", FusedAdam.settings(optimizer));
    }
}
