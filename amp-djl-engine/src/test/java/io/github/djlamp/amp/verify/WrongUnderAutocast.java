package io.github.djlamp.amp.verify;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.function.Supplier;

/**
 * A test double of an engine whose autocast computes wrong: every output 25% too large (its
 * gradients with it), or the right outputs with every gradient 25% too large.
 */
final class WrongUnderAutocast extends ForwardingBackend {

    private final boolean outputs;

    private WrongUnderAutocast(AmpBackend real, boolean outputs) {
        super(real);
        this.outputs = outputs;
    }

    static AmpBackend outputsTooLarge(AmpBackend real) {
        return new WrongUnderAutocast(real, true);
    }

    static AmpBackend gradientsTooLarge(AmpBackend real) {
        return new WrongUnderAutocast(real, false);
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T> T withEngineAutocast(Device device, Precision precision, Supplier<T> forward) {
        NDList computed = (NDList) real.withEngineAutocast(device, precision, forward);
        NDList wrong = new NDList(computed.size());
        for (NDArray output : computed) {
            if (outputs) {
                NDArray fp32 =
                        real.cast(
                                output,
                                Precision.FP32,
                                MemoryLayout.CONTIGUOUS,
                                output.getManager());
                wrong.add(fp32.mul(1.25f));
            } else {
                // the value unchanged, the gradient through it 1.25 times
                NDArray quarter = output.mul(0.25f);
                wrong.add(output.add(quarter.sub(quarter.stopGradient())));
            }
        }
        return (T) wrong;
    }
}
