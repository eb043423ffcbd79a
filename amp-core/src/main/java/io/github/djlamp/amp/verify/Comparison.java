package io.github.djlamp.amp.verify;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.List;
import java.util.Locale;

/** Compares a 16-bit kernel's results with the fp32 reference within {@link ErrorBound}. */
final class Comparison {

    private static final double FP16_MAX = 65504;

    private Comparison() {}

    /**
     * Returns the first result outside its bound, described, or null when all agree.
     *
     * @param actual the 16-bit run: output, input gradient, parameter gradients (as fp32)
     * @param expected the fp32 reference, in the same order
     * @param sums the absolute sums S, in the same order
     * @param names what each entry is, for the message
     * @param reductions each entry's reduction length
     * @param inputGradient whether the input gradient matters (the input needs one)
     * @param precision the 16-bit precision
     * @param backend reads the counts on the host
     */
    static String firstFailure(
            NDList actual,
            NDList expected,
            NDList sums,
            List<String> names,
            long[] reductions,
            boolean inputGradient,
            Precision precision,
            AmpBackend backend) {
        for (int i = 0; i < actual.size(); i++) {
            if (i == 1 && !inputGradient) {
                continue;
            }
            String failure =
                    compare(
                            actual.get(i),
                            expected.get(i),
                            sums.get(i),
                            ErrorBound.of(precision, reductions[i]),
                            precision,
                            backend);
            if (failure != null) {
                return names.get(i) + " " + failure;
            }
        }
        return null;
    }

    private static String compare(
            NDArray actual,
            NDArray expected,
            NDArray sums,
            ErrorBound bound,
            Precision precision,
            AmpBackend backend) {
        // the comparison's arrays, several of the input's size each, go when it ends: a layer's
        // check compares output, input gradient and weight gradients, and kept together they
        // would weigh on the first step's peak
        try (NDManager local = actual.getManager().newSubManager()) {
            actual.tempAttach(local);
            expected.tempAttach(local);
            sums.tempAttach(local);
            NDArray error = actual.sub(expected).abs();
            double largest = backend.readFloat(sums.max());
            NDArray tolerance =
                    sums.mul(bound.relative()).add(bound.absolute() + bound.normwise() * largest);
            // a reference beyond fp16's range is a range problem, which loss scaling handles, not a
            // kernel defect; a NaN reference (non-finite input) proves nothing either way
            double limit = precision == Precision.FP16 ? FP16_MAX : Float.MAX_VALUE;
            NDArray comparable = expected.abs().lte(limit);
            NDArray wrong = error.gt(tolerance).logicalOr(error.isNaN()).logicalAnd(comparable);
            NDArray counted = wrong.toType(DataType.FLOAT32, false);
            float count = backend.readFloat(counted.sum());
            if (count == 0) {
                return null;
            }
            float worst = backend.readFloat(NDArrays.where(wrong, error, error.zerosLike()).max());
            float scale = backend.readFloat(expected.abs().max());
            return String.format(
                    Locale.ROOT,
                    "%.0f of %d values wrong (%.1f%%), off by up to %.3g at a scale of %.3g"
                            + " (bound %.2g S)",
                    count,
                    expected.size(),
                    100.0 * count / expected.size(),
                    worst,
                    scale,
                    bound.relative());
        }
    }
}
