package io.github.djlamp.amp.train;

import ai.djl.training.optimizer.Adam;
import ai.djl.training.optimizer.Optimizer;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * DJL's {@link Adam} fused: PyTorch's {@code _fused_adam_} (kernel {@code adam}, settings {@code
 * beta1}, {@code beta2}, {@code epsilon}). DJL's rule: the gradient is adjusted (rescaleGrad, then
 * clipGrad from above only, as DJL's PyTorch engine clips) and the L2 term {@code wd w} added, the
 * moments move, and {@code w -= lr_t m / (sqrt(v) + eps)} with {@code lr_t = lr sqrt(1 - beta2^t) /
 * (1 - beta1^t)}, {@code t} DJL's update count. Two buffers per parameter: DJL's {@code Adam.means}
 * and {@code Adam.variances}, as they are.
 */
final class FusedAdam implements FusedOptimizerKind {

    /** DJL's moments, in the order the kernel takes them; AdamW keeps the same. */
    static final List<String> MOMENTS = List.of("means", "variances");

    /** {@inheritDoc} */
    @Override
    public Class<? extends Optimizer> optimizerClass() {
        return Adam.class;
    }

    /** {@inheritDoc} */
    @Override
    public int stateFileCode() {
        return 2;
    }

    /** {@inheritDoc} */
    @Override
    public String describe(int buffersPerParameter) {
        return "Adam";
    }

    /** {@inheritDoc} */
    @Override
    public List<String> stateFields(Optimizer optimizer) {
        return MOMENTS;
    }

    /** {@inheritDoc} */
    @Override
    public Kernel kernel(Optimizer optimizer) {
        return new Kernel("adam", settings(optimizer));
    }

    /** The betas and epsilon, which DJL's Adam and AdamW both declare. */
    static Map<String, Float> settings(Optimizer optimizer) {
        Map<String, Float> settings = new LinkedHashMap<>();
        for (String name : List.of("beta1", "beta2", "epsilon")) {
            settings.put(name, (float) DjlOptimizers.read(optimizer, name));
        }
        return settings;
    }
}
