package io.github.djlamp.amp.diagnostics;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** Bad input gets an IllegalArgumentException that names the problem and the fix. */
class ReportErrorsTest {

    private static final PrecisionPolicy FP16 = PrecisionPolicy.mixedFloat16();

    private static String message(Executable call) {
        return assertThrows(IllegalArgumentException.class, call).getMessage();
    }

    private static void assertContains(String message, String... parts) {
        for (String part : parts) {
            assertTrue(message.contains(part), "'" + part + "' not in: " + message);
        }
    }

    private static Block conv(int filters) {
        return Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(filters).build();
    }

    @Test
    void nullBlock() {
        assertContains(
                message(() -> AlignmentReport.of((Block) null, FP16, new Shape(1, 2))),
                "The block is null",
                "model.getBlock()");
        assertContains(
                message(() -> AlignmentReport.of((MixedPrecisionBlock) null, new Shape(1, 2))),
                "The block is null");
    }

    @Test
    void nullPolicy() {
        assertContains(
                message(() -> AlignmentReport.of(conv(8), null, new Shape(1, 2))),
                "policy is null",
                "PrecisionPolicy.mixedFloat16()");
    }

    @Test
    void noInputShapes() {
        assertContains(
                message(() -> AlignmentReport.of(conv(8), FP16)),
                "No input shapes",
                "batch size first",
                "new Shape(64, 1, 28, 28)");
        assertContains(
                message(() -> AlignmentReport.of(conv(8), FP16, (Shape[]) null)),
                "No input shapes");
        assertContains(
                message(() -> AlignmentReport.of(conv(8), FP16, new Shape[] {null})),
                "Input shape 0 is null");
    }

    @Test
    void unknownDimension() {
        assertContains(
                message(() -> AlignmentReport.of(conv(8), FP16, new Shape(-1, 3, 8, 8))),
                "(-1, 3, 8, 8)",
                "size -1 at index 0",
                "concrete positive sizes");
    }

    @Test
    void missingBatchDimensionForAConvolution() {
        Block net = new SequentialBlock().add(conv(16));
        assertContains(
                message(() -> AlignmentReport.of(net, FP16, new Shape(1, 28, 28))),
                "Conv2d at '01Conv2d'",
                "needs a 4-d input (N, C, H, W) but receives (1, 28, 28)",
                "the batch dimension is missing",
                "e.g. (64, 1, 28, 28)",
                "the report's input shapes: [(1, 28, 28)]");
    }

    @Test
    void wrongRankForAConvolution() {
        assertContains(
                message(() -> AlignmentReport.of(conv(16), FP16, new Shape(8, 784))),
                "Conv2d at the root",
                "needs a 4-d input (N, C, H, W) but receives (8, 784) of rank 2",
                "give each input shape as (N, C, H, W), batch first");
    }

    @Test
    void inputTooSmallForTheKernel() {
        assertContains(
                message(() -> AlignmentReport.of(conv(16), FP16, new Shape(8, 3, 2, 2))),
                "too small for its kernel (3, 3)",
                "give a larger input shape");
    }

    @Test
    void groupsThatDoNotDivideTheChannels() {
        Block grouped =
                Conv2d.builder()
                        .setKernelShape(new Shape(3, 3))
                        .setFilters(16)
                        .optGroups(4)
                        .build();
        assertContains(
                message(() -> AlignmentReport.of(grouped, FP16, new Shape(8, 6, 8, 8))),
                "4 groups, which must divide both its 6 input channels and its 16 filters");
    }

    @Test
    void linearGivenTwoInputs() {
        assertContains(
                message(
                        () ->
                                AlignmentReport.of(
                                        Linear.builder().setUnits(8).build(),
                                        FP16,
                                        new Shape(8, 4),
                                        new Shape(8, 4))),
                "Linear at the root takes one input but receives 2 shapes [(8, 4), (8, 4)]");
    }
}
