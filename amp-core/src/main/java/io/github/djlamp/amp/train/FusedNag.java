package io.github.djlamp.amp.train;

import ai.djl.training.optimizer.Nag;
import ai.djl.training.optimizer.Optimizer;
import java.util.List;
import java.util.Map;

/**
 * DJL's {@link Nag} (Nesterov accelerated gradient) fused: PyTorch's {@code _fused_sgd_} with
 * {@code nesterov=True} (kernel {@code nag}, setting {@code momentum}).
 *
 * <p>DJL's rule. DJL's PyTorch engine has no Nag update (0.35.1 and 0.36.0: {@code
 * PtNDArrayEx.nagUpdate} throws "Not implemented"); its MXNet engine calls MXNet 1.9.1's {@code
 * nag_mom_update}, which with {@code g' = clip(rescaleGrad g) + wd w} (clipped to {@code
 * [-clipGrad, clipGrad]}, both sides, as DJL's builder documents) and a momentum {@code v} starting
 * at zero does {@code v = momentum v - lr g'}, then {@code w = w + momentum v - lr g'}. Nag's
 * javadoc ({@code state = momentum state + g'}, {@code w -= lr (g' + momentum state)}) is the same
 * update for a constant rate, with {@code state = -v / lr}.
 *
 * <p>PyTorch's kernel, dampening 0: {@code b = momentum b + g'}, then {@code w -= lr (g' + momentum
 * b)}. With a constant rate put {@code b = -v / lr}: {@code v = momentum v - lr g'} becomes {@code
 * b = momentum b + g'}, and {@code w + momentum v - lr g'} becomes {@code w - lr (g' + momentum
 * b)}: the kernel as it is, {@code lr} and {@code wd} passed through. With a schedule {@code v}
 * holds every past rate, so the kernel scales the gradient by the step's rate first ({@code g'' =
 * lr_t g'}) and runs with rate 1 and no decay: {@code b = momentum b + lr_t g'} and {@code w -=
 * lr_t g' + momentum b}, which is DJL's update for any rates with {@code b = -v}. The state file
 * therefore holds the buffer with the factor {@code -lr} or {@code -1} to DJL's {@code
 * Nag.momentumStates}. The first step is the same in both: a zero buffer gives {@code b = g'}.
 * DJL's builder refuses a momentum of 0, so there is always one buffer per parameter.
 */
final class FusedNag implements FusedOptimizerKind {

    /** {@inheritDoc} */
    @Override
    public Class<? extends Optimizer> optimizerClass() {
        return Nag.class;
    }

    /** {@inheritDoc} */
    @Override
    public int stateFileCode() {
        return 4;
    }

    /** {@inheritDoc} */
    @Override
    public String describe(int buffersPerParameter) {
        return "Nag";
    }

    /** {@inheritDoc} */
    @Override
    public List<String> stateFields(Optimizer optimizer) {
        return List.of("momentumStates");
    }

    /** {@inheritDoc} */
    @Override
    public Kernel kernel(Optimizer optimizer) {
        return new Kernel(
                "nag", Map.of("momentum", (float) DjlOptimizers.read(optimizer, "momentum")));
    }

    /** {@inheritDoc} */
    @Override
    public float firstBufferToDjl(float fixedRate) {
        return Float.isNaN(fixedRate) ? -1f : -fixedRate;
    }
}
