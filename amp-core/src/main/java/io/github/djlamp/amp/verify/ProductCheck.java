package io.github.djlamp.amp.verify;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The check of a 16-bit batched matrix product of two activations (attention's scores, query times
 * keys, and its weighted values, weights times values), as {@link KernelVerifier} checks a layer:
 * both operands rounded to the 16-bit format first, the product and the gradients of both operands
 * from a fixed cotangent compared with fp32 within {@link ErrorBound}, the fp32 passes on {@link
 * SampledRows} of the batch while the 16-bit product runs at the full shape, and the fp32 reference
 * itself compared with a direct double-precision sum on its first row. There is no other memory
 * layout to try: a wrong product runs in fp32.
 */
final class ProductCheck {

    private final AmpBackend backend;

    ProductCheck(AmpBackend backend) {
        this.backend = backend;
    }

    /**
     * Checks {@code left.matMul(right)}.
     *
     * @param operation the product's description, for the verdict
     * @param left the left operand, (..., M, K), any precision
     * @param right the right operand, (..., K, N), the same leading axes
     * @param gradients whether the operands' gradients are computed, so their kernels are checked
     * @param precision the 16-bit precision to check
     */
    KernelVerdict check(
            String operation, NDArray left, NDArray right, boolean gradients, Precision precision) {
        Device device = left.getDevice();
        Shape leftShape = left.getShape();
        Shape rightShape = right.getShape();
        SampledRows rows = SampledRows.ofProduct(leftShape);
        List<String> findings = new ArrayList<>();
        try (NDManager scratch = left.getManager().newSubManager()) {
            NDArray detachedLeft = FiniteOperands.of(left, backend, scratch);
            NDArray detachedRight = FiniteOperands.of(right, backend, scratch);
            NDList reference =
                    new NDList(
                            KernelVerifier.rounded(
                                    backend, rows.take(detachedLeft), precision, scratch),
                            KernelVerifier.rounded(
                                    backend, rows.take(detachedRight), precision, scratch));
            Shape outputShape = outputShape(rows.shapeOf(leftShape), rightShape);
            NDArray unrounded = KernelVerifier.cotangent(outputShape, scratch);
            NDArray cotangent = KernelVerifier.rounded(backend, unrounded, precision, scratch);
            unrounded.close();
            NDList expected;
            NDList sums;
            try {
                NDList[] passes =
                        KernelVerifier.fp32Passes(
                                backend,
                                device,
                                ProductCheck::product,
                                reference,
                                cotangent,
                                scratch);
                expected = passes[0];
                sums = passes[1];
            } catch (RuntimeException e) {
                findings.add("the fp32 reference could not run: " + e.getMessage());
                return verdict(
                        operation,
                        leftShape,
                        device,
                        precision,
                        KernelVerdict.Outcome.NOT_CHECKED,
                        findings);
            }
            String unsound = checkReference(reference, expected.get(0));
            if (unsound != null) {
                findings.add(unsound);
                return verdict(
                        operation,
                        leftShape,
                        device,
                        precision,
                        KernelVerdict.Outcome.PLATFORM_UNSOUND,
                        findings);
            }
            String failure;
            try (NDManager attempt = scratch.newSubManager()) {
                // the operands cast as training casts them, in the layout they have
                NDList low =
                        new NDList(
                                backend.cast(
                                        detachedLeft, precision, MemoryLayout.PRESERVE, attempt),
                                backend.cast(
                                        detachedRight, precision, MemoryLayout.PRESERVE, attempt));
                NDArray lowCotangent =
                        backend.cast(cotangent, precision, MemoryLayout.CONTIGUOUS, attempt);
                NDList actual =
                        backend.valueAndGradients(
                                leaves -> rows.take(product(leaves)), low, lowCotangent, attempt);
                failure = gradients ? outsideSampledRows(actual, rows) : null;
                if (failure == null) {
                    actual.set(1, rows.take(actual.get(1)));
                    actual.set(2, rows.take(actual.get(2)));
                    int compared = gradients ? 3 : 1;
                    failure =
                            Comparison.firstFailure(
                                    actual.subNDList(0, compared),
                                    expected.subNDList(0, compared),
                                    sums.subNDList(0, compared),
                                    Arrays.asList("output", "left gradient", "right gradient"),
                                    reductionLengths(leftShape, rightShape),
                                    true,
                                    precision,
                                    backend);
                }
            } catch (RuntimeException e) {
                failure = "the kernel failed: " + e.getMessage();
            }
            if (failure == null) {
                return verdict(
                        operation,
                        leftShape,
                        device,
                        precision,
                        KernelVerdict.Outcome.VERIFIED,
                        findings);
            }
            findings.add(failure);
            return verdict(
                    operation,
                    leftShape,
                    device,
                    precision,
                    KernelVerdict.Outcome.FP32_FALLBACK,
                    findings);
        }
    }

    private static NDArray product(NDList operands) {
        return operands.get(0).matMul(operands.get(1));
    }

    private static Shape outputShape(Shape left, Shape right) {
        long[] dims = left.getShape().clone();
        dims[dims.length - 1] = right.get(right.dimension() - 1);
        return new Shape(dims);
    }

    /**
     * How many products each value sums: the output K (left's last axis), the left operand's
     * gradient (cotangent times right transposed) N, the right operand's (left transposed times
     * cotangent) M.
     */
    private static long[] reductionLengths(Shape left, Shape right) {
        return new long[] {
            left.get(left.dimension() - 1),
            right.get(right.dimension() - 1),
            left.get(left.dimension() - 2)
        };
    }

    private String outsideSampledRows(NDList actual, SampledRows rows) {
        String failure = rows.gradientOutside(actual.get(1), "left gradient", backend);
        return failure != null
                ? failure
                : rows.gradientOutside(actual.get(2), "right gradient", backend);
    }

    /**
     * Compares the first row of the first matrix of the fp32 reference with direct double-precision
     * sums: a row of a product is a linear layer's output whose weight is the right matrix
     * transposed.
     */
    private String checkReference(NDList reference, NDArray output) {
        NDArray left = reference.get(0);
        NDArray right = reference.get(1);
        long k = left.getShape().get(left.getShape().dimension() - 1);
        long n = right.getShape().get(right.getShape().dimension() - 1);
        long m = left.getShape().get(left.getShape().dimension() - 2);
        try (NDManager local = left.getManager().newSubManager()) {
            NDArray row = left.reshape(-1, m, k).get(0).get(0);
            NDArray weight = right.reshape(-1, k, n).get(0).transpose(1, 0).reshape(-1);
            NDArray result = output.reshape(-1, m, n).get(0).get(0);
            for (NDArray array : new NDArray[] {row, weight, result}) {
                array.attach(local);
            }
            String mismatch =
                    DirectSum.linear(
                            backend.readFloats(row),
                            backend.readFloats(weight),
                            null,
                            backend.readFloats(result));
            return mismatch == null ? null : "the fp32 reference is wrong: " + mismatch;
        }
    }

    private static KernelVerdict verdict(
            String operation,
            Shape leftShape,
            Device device,
            Precision precision,
            KernelVerdict.Outcome outcome,
            List<String> findings) {
        return new KernelVerdict(
                operation,
                leftShape,
                device,
                precision,
                outcome,
                outcome == KernelVerdict.Outcome.FP32_FALLBACK ? null : MemoryLayout.PRESERVE,
                findings);
    }
}
