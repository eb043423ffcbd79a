package io.github.djlamp.amp.train;

import ai.djl.training.optimizer.Nag;
import ai.djl.training.optimizer.Optimizer;
import java.util.List;
import java.util.Map;

/**
 * DJL's {@link Nag} (Nesterov accelerated gradient) fused: PyTorch's {@code _fused_sgd_} with
 * {@code nesterov=True} (kernel {@code nag}, setting {@code momentum}), and a correction of the
 * buffer's decay term.
 *
 * <p>DJL's rule. DJL's PyTorch engine has no Nag update (0.35.1 and 0.36.0: {@code
 * PtNDArrayEx.nagUpdate} throws "Not implemented"); its MXNet engine calls MXNet 1.9.1's {@code
 * nag_mom_update} with the weight as the operator's output. With {@code c = clip(rescaleGrad g)}
 * (to {@code [-clipGrad, clipGrad]}, both sides, as DJL's builder documents) and a momentum {@code
 * v} starting at zero, the kernel does {@code v = momentum v}, {@code w' = w - v + (momentum + 1)
 * (v - lr (c + wd w))}, then {@code v = v - lr (c + wd w')}: the last statement reads the weight it
 * has just written. So {@code w' = w + momentum v' - lr g'} with {@code g' = c + wd w} and {@code
 * v' = momentum v - lr g'}, and the stored velocity is {@code v' + lr wd (w - w')}. Nag's javadoc
 * ({@code state = momentum state + g'}, {@code w -= lr (g' + momentum state)}) is the same update
 * for a constant rate without that last term, with {@code state = -v / lr}.
 *
 * <p>PyTorch's kernel, dampening 0: {@code b = momentum b + g'}, then {@code w -= lr (g' + momentum
 * b)}. With a constant rate put {@code b = -v / lr}: {@code v' = momentum v - lr g'} becomes {@code
 * b = momentum b + g'}, and {@code w + momentum v' - lr g'} becomes {@code w - lr (g' + momentum
 * b)}: the kernel as it is, {@code lr} passed through and the decay put into the gradient first.
 * The decay term at the new weight is then {@code b += wd (w' - w) = -lr wd (g' + momentum b)}: a
 * second {@code _fused_sgd_} on the buffers, without momentum, with rate {@code lr wd} and the same
 * skip. With a schedule {@code v} holds every past rate, so the kernel scales the gradient by the
 * step's rate first ({@code g'' = lr_t g'}) and runs with rate 1 and no decay: {@code b = momentum
 * b + lr_t g'} and {@code w -= lr_t g' + momentum b}, which is DJL's update for any rates with
 * {@code b = -v}; the correction is {@code b -= lr_t wd (g'' + momentum b)}. The state file
 * therefore holds the buffer with the factor {@code -lr} or {@code -1} to DJL's {@code
 * Nag.momentumStates}. The first step's weight is the same in both: a zero buffer gives {@code b =
 * g'}. DJL's builder refuses a momentum of 0, so there is always one buffer per parameter.
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
