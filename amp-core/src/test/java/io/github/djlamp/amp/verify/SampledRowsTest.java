package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import org.junit.jupiter.api.Test;

/** Which samples the fp32 passes of a kernel check cover. */
class SampledRowsTest {

    private static final Conv2d CONV =
            Conv2d.builder().setFilters(8).setKernelShape(new Shape(3, 3)).build();
    private static final Linear LINEAR = Linear.builder().setUnits(8).build();

    @Test
    void aLargeBatchIsSampledAtItsEndsAndBetween() {
        Shape input = new Shape(32, 3, 8, 8);
        SampledRows rows = SampledRows.of(CONV, input);
        assertEquals("rows [0, 10, 20, 31] of 32", rows.toString());
        assertEquals(new Shape(4, 3, 8, 8), rows.shapeOf(input));
        assertEquals(new Shape(32, 3, 8, 8), input, "the input's own shape is left as it is");
        assertEquals(new Shape(4, 16, 8, 8), rows.shapeOf(new Shape(32, 16, 8, 8)));
    }

    @Test
    void aSmallBatchIsCheckedWhole() {
        for (long batch : new long[] {1, 2, 4}) {
            SampledRows rows = SampledRows.of(CONV, new Shape(batch, 3, 8, 8));
            assertTrue(rows.isAll(), rows.toString());
            assertEquals(new Shape(batch, 3, 8, 8), rows.shapeOf(new Shape(batch, 3, 8, 8)));
        }
        assertEquals(
                "rows [0, 1, 2, 4] of 5", SampledRows.of(CONV, new Shape(5, 3, 8, 8)).toString());
    }

    @Test
    void aLinearLayerSamplesItsFirstAxisAndNeverItsFeatures() {
        assertEquals(
                "rows [0, 5, 10, 15] of 16",
                SampledRows.of(LINEAR, new Shape(16, 128, 256)).toString());
        assertTrue(SampledRows.of(LINEAR, new Shape(256)).isAll());
        // a convolution's input without a batch axis: nothing to sample
        assertTrue(SampledRows.of(CONV, new Shape(16, 8, 8)).isAll());
    }

    @Test
    void onlyUnsampledRowsWithAValueAreReported() {
        SampledRows rows = SampledRows.of(CONV, new Shape(7, 3, 8, 8));
        assertEquals("rows [0, 2, 4, 6] of 7", rows.toString());
        assertArrayEquals(
                new long[] {3, 5},
                rows.nonZeroOutside(new float[] {1f, 0f, 2f, -0.5f, 3f, Float.NaN, 4f}));
        assertArrayEquals(
                new long[0], rows.nonZeroOutside(new float[] {1f, 0f, 2f, 0f, 3f, -0f, 4f}));
    }
}
