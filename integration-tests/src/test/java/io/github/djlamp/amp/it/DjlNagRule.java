package io.github.djlamp.amp.it;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.training.optimizer.Nag;
import ai.djl.training.tracker.Tracker;
import java.util.HashMap;
import java.util.Map;

/**
 * DJL's {@link Nag} update as DJL's only engine with one runs it (its MXNet engine calls MXNet
 * 1.9.1's {@code nag_mom_update}; DJL's PyTorch engine throws "Not implemented"): with {@code c =
 * clip(rescaleGrad g, -clipGrad, clipGrad)} and {@code g' = c + wd w}, {@code v = momentum v - lr
 * g'} and {@code w = w + momentum v - lr g'}, then the velocity's decay term is taken again at the
 * new weight: {@code v = v + lr wd (w_old - w_new)}, so that {@code v = momentum v_old - lr (c + wd
 * w_new)}. (MXNet's kernel updates the velocity after the weight, and DJL passes the weight as the
 * operator's output: the kernel reads the weight it has just written.) {@code v} from zero, the
 * rate from DJL's update count. The reference the fused Nag is checked against.
 */
final class DjlNagRule extends Nag {

    private final Tracker rate;
    private final float momentum;
    private final Map<String, NDArray> velocities = new HashMap<>();

    /**
     * Creates the rule with the settings of {@code builder}, whose rate and momentum DJL keeps
     * private: the same ones are passed again.
     */
    DjlNagRule(Nag.Builder builder, Tracker rate, float momentum) {
        super(builder.setLearningRateTracker(rate).setMomentum(momentum));
        this.rate = rate;
        this.momentum = momentum;
    }

    @Override
    public void update(String parameterId, NDArray weight, NDArray grad) {
        float lr = rate.getNewValue(updateCount(parameterId));
        NDArray v = velocities.computeIfAbsent(parameterId, k -> weight.zerosLike());
        try (NDManager scope = weight.getManager().newSubManager()) {
            NDArray g = scoped(scope, grad.mul(rescaleGrad));
            if (clipGrad >= 0f) {
                g = scoped(scope, g.clip(-clipGrad, clipGrad));
            }
            NDArray decayed = scoped(scope, g.add(scoped(scope, weight.mul(getWeightDecay()))));
            NDArray step = scoped(scope, decayed.mul(lr));
            v.muli(momentum);
            // MXNet: out = w - v + (momentum + 1) (v - lr g'), out being the weight itself
            weight.addi(scoped(scope, scoped(scope, v.sub(step)).mul(momentum))).subi(step);
            // then v = v - lr (c + wd w), reading the weight just written
            NDArray newDecayed = scoped(scope, g.add(scoped(scope, weight.mul(getWeightDecay()))));
            v.subi(scoped(scope, newDecayed.mul(lr)));
        }
        // as DJL's native updates do: DJL hands the optimizer a copy of the gradient
        if (weight.hasGradient()) {
            try (NDArray own = weight.getGradient()) {
                own.muli(0f);
            }
        }
    }

    /** The velocity {@code v} of a parameter, null before its first update. */
    NDArray velocity(String parameterId) {
        return velocities.get(parameterId);
    }

    private static NDArray scoped(NDManager scope, NDArray array) {
        array.attach(scope);
        return array;
    }
}
