package io.github.djlamp.amp.verify;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.pytorch.GcSafe;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.function.Function;

/**
 * Test doubles of the engine layer whose batched matrix products are wrong: in 16 bits in the last
 * matrix of the batch only (its left operand arrives 1.5 times too large, as a kernel that computes
 * a partial last block apart might be wrong), or in fp32 everywhere (1% too large), where no
 * fallback helps. Everything else is the real engine layer's.
 */
final class WrongProductBackend extends ForwardingBackend {

    private final boolean fp32;

    private WrongProductBackend(AmpBackend real, boolean fp32) {
        super(real);
        this.fp32 = fp32;
    }

    /**
     * Wrong in 16 bits, in the last matrix of the batch of a left operand of three axes or more.
     */
    static AmpBackend wrongInLastSample(AmpBackend real) {
        return new WrongProductBackend(real, false);
    }

    /** Wrong in fp32: the reference itself. */
    static AmpBackend wrongInFp32(AmpBackend real) {
        return new WrongProductBackend(real, true);
    }

    @Override
    public NDArray cast(NDArray array, Precision target, MemoryLayout layout, NDManager manager) {
        // the operands' casts keep their layout; the check's rounding and cotangent are contiguous
        if (fp32
                || layout != MemoryLayout.PRESERVE
                || !target.isReduced()
                || array.getShape().dimension() < 3
                || isLow(array)) {
            return real.cast(array, target, layout, manager);
        }
        NDArray last = GcSafe.mul(array.get(new NDIndex("-1:")), 1.5f);
        NDArray wrong = NDArrays.concat(new NDList(array.get(new NDIndex(":-1")), last), 0);
        return real.cast(wrong, target, layout, manager);
    }

    @Override
    public NDList valueAndGradients(
            Function<NDList, NDArray> function,
            NDList inputs,
            NDArray cotangent,
            NDManager resultManager) {
        if (!fp32 || inputs.size() != 2 || isLow(inputs.get(0))) {
            return real.valueAndGradients(function, inputs, cotangent, resultManager);
        }
        return real.valueAndGradients(
                leaves -> GcSafe.mul(function.apply(leaves), 1.01f),
                inputs,
                cotangent,
                resultManager);
    }

    private boolean isLow(NDArray array) {
        Precision precision = real.precisionOf(array);
        return precision != null && precision.isReduced();
    }
}
