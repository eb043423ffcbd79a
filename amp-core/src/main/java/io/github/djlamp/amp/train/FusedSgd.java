package io.github.djlamp.amp.train;

import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.optimizer.Sgd;
import java.util.List;
import java.util.Map;

/**
 * DJL's {@link Sgd} fused: PyTorch's {@code _fused_sgd_} (kernel {@code sgd}, setting {@code
 * momentum}). DJL's rule: the gradient is adjusted (rescaleGrad, then clipGrad from above only, as
 * DJL's PyTorch engine clips), then {@code d = lr (g + wd w)}; without momentum {@code w -= d};
 * with momentum {@code b = momentum b + d}, {@code w -= b}, one buffer per parameter, DJL's {@code
 * Sgd.momentumStates}.
 *
 * <p>With a constant rate the kernel keeps the buffer as {@code b / lr} (PyTorch's form, the same
 * update), so the state file records the rate as the factor to DJL's buffer; with a schedule the
 * kernel puts the rate into the buffer, as DJL does.
 */
final class FusedSgd implements FusedOptimizerKind {

    /** {@inheritDoc} */
    @Override
    public Class<? extends Optimizer> optimizerClass() {
        return Sgd.class;
    }

    /** {@inheritDoc} */
    @Override
    public int stateFileCode() {
        return 1;
    }

    /** {@inheritDoc} */
    @Override
    public String describe(int buffersPerParameter) {
        return buffersPerParameter == 0 ? "Sgd without momentum" : "Sgd with momentum";
    }

    /** {@inheritDoc} */
    @Override
    public List<String> stateFields(Optimizer optimizer) {
        return momentum(optimizer) == 0f ? List.of() : List.of("momentumStates");
    }

    /** {@inheritDoc} */
    @Override
    public Kernel kernel(Optimizer optimizer) {
        return new Kernel("sgd", Map.of("momentum", momentum(optimizer)));
    }

    /** {@inheritDoc} */
    @Override
    public float firstBufferToDjl(float fixedRate) {
        return Float.isNaN(fixedRate) ? 1f : fixedRate;
    }

    private static float momentum(Optimizer optimizer) {
        return (float) DjlOptimizers.read(optimizer, Sgd.class, "momentum");
    }
}
