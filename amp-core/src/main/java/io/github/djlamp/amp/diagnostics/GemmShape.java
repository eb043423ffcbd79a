package io.github.djlamp.amp.diagnostics;

import java.util.Objects;

/**
 * The matrix multiplication a layer turns into: an (M x K) matrix times a (K x N) matrix.
 *
 * <p>For a {@code Linear} layer M is the number of rows (the product of the input's leading
 * dimensions, the batch size for 2-d input), N the number of units (output features) and K the
 * number of input features. For a convolution computed as an implicit GEMM, M is the batch size
 * times the number of output positions, N the number of filters (output channels) and K the input
 * channels per group times the kernel volume.
 */
public final class GemmShape {

    private final long m;
    private final long n;
    private final long k;

    /**
     * Creates a GEMM shape.
     *
     * @param m rows of the result
     * @param n columns of the result
     * @param k the reduction dimension
     * @throws IllegalArgumentException when a dimension is not positive
     */
    public GemmShape(long m, long n, long k) {
        if (m < 1 || n < 1 || k < 1) {
            throw new IllegalArgumentException(
                    "GEMM dimensions must be positive, got M=" + m + " N=" + n + " K=" + k);
        }
        this.m = m;
        this.n = n;
        this.k = k;
    }

    /**
     * Returns M, the rows of the result.
     *
     * @return M
     */
    public long getM() {
        return m;
    }

    /**
     * Returns N, the columns of the result.
     *
     * @return N
     */
    public long getN() {
        return n;
    }

    /**
     * Returns K, the reduction dimension.
     *
     * @return K
     */
    public long getK() {
        return k;
    }

    /**
     * Returns whether M is a multiple of {@link AlignmentReport#MULTIPLE}.
     *
     * @return true when M is aligned
     */
    public boolean isMAligned() {
        return Alignment.isAligned(m);
    }

    /**
     * Returns whether N is a multiple of {@link AlignmentReport#MULTIPLE}.
     *
     * @return true when N is aligned
     */
    public boolean isNAligned() {
        return Alignment.isAligned(n);
    }

    /**
     * Returns whether K is a multiple of {@link AlignmentReport#MULTIPLE}.
     *
     * @return true when K is aligned
     */
    public boolean isKAligned() {
        return Alignment.isAligned(k);
    }

    /**
     * Returns the floating-point operations of one multiplication: {@code 2 * M * N * K} (one
     * multiply and one add per term).
     *
     * @return the FLOPs of one forward pass of the layer
     * @throws ArithmeticException when the count does not fit in a long
     */
    public long getFlops() {
        return Math.multiplyExact(Math.multiplyExact(Math.multiplyExact(2L, m), n), k);
    }

    /** {@inheritDoc} */
    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof GemmShape)) {
            return false;
        }
        GemmShape other = (GemmShape) o;
        return m == other.m && n == other.n && k == other.k;
    }

    /** {@inheritDoc} */
    @Override
    public int hashCode() {
        return Objects.hash(m, n, k);
    }

    /**
     * Returns the shape as {@code M=.. N=.. K=..}.
     *
     * @return e.g. {@code M=32 N=64 K=100}
     */
    @Override
    public String toString() {
        return "M=" + m + " N=" + n + " K=" + k;
    }
}
