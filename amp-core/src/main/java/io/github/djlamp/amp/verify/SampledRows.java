package io.github.djlamp.amp.verify;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.convolutional.Convolution;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.Arrays;
import java.util.TreeSet;
import java.util.stream.LongStream;

/**
 * The rows of a layer's input (its samples: axis 0, along which a convolution or linear layer
 * computes each row on its own) that the fp32 passes of a kernel check cover.
 *
 * <p>The 16-bit kernel runs at the full shape, so that the kernel checked is the one training runs,
 * with a cotangent that is zero outside these rows: its output and input gradient are then compared
 * on these rows, its weight and bias gradients (sums over these rows only) whole, and the input
 * gradient of every other row must be zero. The two fp32 passes, the reference and the absolute
 * sums, run on these rows alone. The first and the last row are always among them: a kernel that
 * blocks the batch computes its first and its partial last block apart.
 */
final class SampledRows {

    /** How many rows the fp32 passes cover at most. */
    static final int COUNT = 4;

    private final long total;
    private final long[] rows;

    private SampledRows(long total, long[] rows) {
        this.total = total;
        this.rows = rows;
    }

    /**
     * Returns the rows to sample of a layer's input: every row where the input has no more than
     * {@link #COUNT}, or has no axis of independent rows (a linear layer's one-dimensional input, a
     * convolution's input without a batch axis).
     *
     * @param block the layer, a convolution or a linear layer
     * @param input the shape of its input
     * @return the rows
     */
    static SampledRows of(Block block, Shape input) {
        // a convolution's batch axis exists when the input has one beside channels and space
        boolean batched =
                block instanceof Convolution
                        ? input.dimension()
                                == ((Convolution) block).getKernelShape().dimension() + 2
                        : input.dimension() > 1;
        return sample(batched, input);
    }

    /**
     * Returns the rows to sample of an operand of a batched matrix product (axis 0 of an operand of
     * three or more axes: each of its matrices is multiplied with the other operand's matrix at the
     * same index); every row where it has no more than {@link #COUNT}, or no batch axis.
     *
     * @param operand the shape of the product's left operand
     * @return the rows
     */
    static SampledRows ofProduct(Shape operand) {
        return sample(operand.dimension() > 2, operand);
    }

    private static SampledRows sample(boolean batched, Shape input) {
        long total = batched ? input.get(0) : 1;
        if (!batched || total <= COUNT) {
            return new SampledRows(total, null);
        }
        TreeSet<Long> chosen = new TreeSet<>();
        for (int i = 0; i < COUNT; i++) {
            chosen.add(i * (total - 1) / (COUNT - 1));
        }
        return new SampledRows(total, chosen.stream().mapToLong(Long::longValue).toArray());
    }

    /**
     * Returns whether every row is sampled, so that nothing is taken apart.
     *
     * @return true when the fp32 passes run on the whole input
     */
    boolean isAll() {
        return rows == null;
    }

    /**
     * Returns the sampled rows of an array whose axis 0 is the input's rows (the input itself, the
     * layer's output, the input's gradient), in order; the array itself where every row is sampled.
     * Slices and one concatenation: no call that reads the array's data type, so a bf16 array is
     * safe here.
     *
     * @param array the array
     * @return the rows, on the array's manager
     */
    NDArray take(NDArray array) {
        if (isAll()) {
            return array;
        }
        NDList pieces = new NDList(rows.length);
        for (long row : rows) {
            pieces.add(array.get(new NDIndex("{}:{}", row, row + 1)));
        }
        NDArray taken = NDArrays.concat(pieces, 0);
        pieces.close();
        return taken;
    }

    /**
     * Returns the rows that are not sampled and hold a non-zero value, of per-row largest absolute
     * values read on the host.
     *
     * @param rowMaxima the largest absolute value of each row, one per row
     * @return the indices of such rows, ascending
     */
    long[] nonZeroOutside(float[] rowMaxima) {
        return LongStream.range(0, rowMaxima.length)
                .filter(row -> rowMaxima[(int) row] != 0 && Arrays.binarySearch(rows, row) < 0)
                .toArray();
    }

    /**
     * Returns what is wrong with a 16-bit gradient outside the sampled rows, where the check's
     * cotangent is zero and a right kernel gives exactly zero, or null.
     *
     * @param gradient the gradient of an array whose axis 0 is the sampled one, at its full shape
     * @param what what the gradient is, for the message
     * @param backend reads the rows' largest values on the host
     * @return the finding, or null
     */
    String gradientOutside(NDArray gradient, String what, AmpBackend backend) {
        if (isAll()) {
            return null;
        }
        float[] rowMaxima =
                backend.readFloats(gradient.abs().reshape(total, -1).max(new int[] {1}));
        long[] wrong = nonZeroOutside(rowMaxima);
        if (wrong.length == 0) {
            return null;
        }
        return what
                + " non-zero in "
                + wrong.length
                + " of "
                + total
                + " rows whose cotangent is zero (the check's cotangent reaches "
                + this
                + ")";
    }

    /**
     * Returns the shape of the sampled rows of an array of shape {@code full}.
     *
     * @param full the shape of the whole array
     * @return the shape of what {@link #take} returns
     */
    Shape shapeOf(Shape full) {
        if (isAll()) {
            return full;
        }
        long[] dims = full.getShape().clone();
        dims[0] = rows.length;
        return new Shape(dims);
    }

    /**
     * Returns how many rows the input has.
     *
     * @return the rows along axis 0
     */
    long total() {
        return total;
    }

    @Override
    public String toString() {
        return isAll()
                ? "all " + total + " rows"
                : "rows " + Arrays.toString(rows) + " of " + total;
    }
}
