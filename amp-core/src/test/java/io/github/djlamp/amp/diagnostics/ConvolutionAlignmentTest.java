package io.github.djlamp.amp.diagnostics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv1d;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.convolutional.Conv3d;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import org.junit.jupiter.api.Test;

/** Convolutions as implicit GEMMs, checked by hand. No engine needed. */
class ConvolutionAlignmentTest {

    private static AlignmentEntry only(Block block, Shape input) {
        AlignmentReport report = AlignmentReport.of(block, PrecisionPolicy.mixedFloat16(), input);
        assertEquals(1, report.getEntries().size());
        return report.getEntries().get(0);
    }

    @Test
    void conv2dWithStrideAndPadding() {
        // out = (32 + 2*1 - 1*(5-1) - 1) / 2 + 1 = 29 / 2 + 1 = 15 per side.
        Block conv =
                Conv2d.builder()
                        .setKernelShape(new Shape(5, 5))
                        .setFilters(16)
                        .optStride(new Shape(2, 2))
                        .optPadding(new Shape(1, 1))
                        .build();
        AlignmentEntry e = only(conv, new Shape(8, 3, 32, 32));
        assertEquals(LayerKind.CONVOLUTION, e.getKind());
        assertEquals(new GemmShape(8 * 15 * 15, 16, 3 * 5 * 5), e.getGemmShape());
        assertEquals(3, e.getInChannels());
        assertEquals(16, e.getOutChannels());
        assertEquals(1, e.getGroups());
        assertFalse(e.isInChannelsAligned());
        assertTrue(e.isOutChannelsAligned());
        assertEquals(AlignmentStatus.MISALIGNED, e.getStatus());
        assertTrue(e.readsModelInput());
        assertTrue(
                e.getSuggestion().startsWith("pad in-channels 3 -> 8 with zero channels"),
                e.getSuggestion());
        // the only layer, 100% of the FLOPs: not a layer to leave as it is
        assertFalse(e.getSuggestion().contains("leaving it is fine"), e.getSuggestion());
        assertEquals(2L * 1800 * 16 * 75, e.getFlops());
    }

    @Test
    void conv2dWithUnequalKernelStridePaddingAndDilation() {
        // H: (32 + 2*1 - 2*(3-1) - 1) / 1 + 1 = 30;  W: (32 + 0 - 1*(5-1) - 1) / 2 + 1 = 14.
        Block conv =
                Conv2d.builder()
                        .setKernelShape(new Shape(3, 5))
                        .setFilters(24)
                        .optStride(new Shape(1, 2))
                        .optPadding(new Shape(1, 0))
                        .optDilation(new Shape(2, 1))
                        .build();
        AlignmentEntry e = only(conv, new Shape(2, 16, 32, 32));
        assertEquals(new GemmShape(2 * 30 * 14, 24, 16 * 3 * 5), e.getGemmShape());
        assertTrue(e.isAligned());
        assertEquals("", e.getSuggestion());
    }

    @Test
    void convolutionMIsInformationalOnly() {
        // M = 3 * 5 * 5 = 75 is odd, but cuDNN tiles M itself: the channels decide.
        Block conv = Conv2d.builder().setKernelShape(new Shape(1, 1)).setFilters(8).build();
        AlignmentEntry e = only(conv, new Shape(3, 8, 5, 5));
        assertEquals(new GemmShape(75, 8, 8), e.getGemmShape());
        assertFalse(e.getGemmShape().isMAligned());
        assertTrue(e.isAligned());
    }

    @Test
    void groupedConvolutionJudgesChannelsPerGroup() {
        // groups 4: K = 32 / 4 * 9 = 72; per group 8 in, 16 out: aligned.
        Block grouped =
                Conv2d.builder()
                        .setKernelShape(new Shape(3, 3))
                        .optPadding(new Shape(1, 1))
                        .setFilters(64)
                        .optGroups(4)
                        .build();
        AlignmentEntry e = only(grouped, new Shape(4, 32, 16, 16));
        assertEquals(new GemmShape(4 * 16 * 16, 64, 72), e.getGemmShape());
        assertEquals(4, e.getGroups());
        assertTrue(e.isAligned());

        // groups 8: 4 in and 8 out per group: the input side is misaligned.
        Block finer =
                Conv2d.builder()
                        .setKernelShape(new Shape(3, 3))
                        .optPadding(new Shape(1, 1))
                        .setFilters(64)
                        .optGroups(8)
                        .build();
        AlignmentEntry f = only(finer, new Shape(4, 32, 16, 16));
        assertEquals(new GemmShape(4 * 16 * 16, 64, 4 * 9), f.getGemmShape());
        assertFalse(f.isInChannelsAligned());
        assertTrue(f.isOutChannelsAligned());
        assertTrue(
                f.getSuggestion().startsWith("in-channels per group 32/8 = 4 -> 8"),
                f.getSuggestion());
    }

    @Test
    void depthwiseConvolutionIsNotWorthAligning() {
        Block depthwise =
                Conv2d.builder()
                        .setKernelShape(new Shape(3, 3))
                        .optPadding(new Shape(1, 1))
                        .setFilters(32)
                        .optGroups(32)
                        .build();
        AlignmentEntry e = only(depthwise, new Shape(8, 32, 16, 16));
        assertEquals(new GemmShape(8 * 256, 32, 9), e.getGemmShape());
        assertEquals(AlignmentStatus.MISALIGNED, e.getStatus());
        assertTrue(e.getSuggestion().startsWith("depthwise convolution"), e.getSuggestion());
    }

    @Test
    void conv1dAndConv3d() {
        // Conv1d: (100 - 3) / 1 + 1 = 98 positions.
        Block conv1d = Conv1d.builder().setKernelShape(new Shape(3)).setFilters(32).build();
        assertEquals(
                new GemmShape(2 * 98, 32, 16 * 3),
                only(conv1d, new Shape(2, 16, 100)).getGemmShape());

        // Conv3d: D (8 + 2 - 2 - 1) / 2 + 1 = 4, H = W = (16 + 2 - 2 - 1) / 2 + 1 = 8.
        Block conv3d =
                Conv3d.builder()
                        .setKernelShape(new Shape(3, 3, 3))
                        .optStride(new Shape(2, 2, 2))
                        .optPadding(new Shape(1, 1, 1))
                        .setFilters(12)
                        .build();
        AlignmentEntry e = only(conv3d, new Shape(2, 8, 8, 16, 16));
        assertEquals(new GemmShape(2 * 4 * 8 * 8, 12, 8 * 27), e.getGemmShape());
        assertFalse(e.isOutChannelsAligned());
        // the only 16-bit layer is the output layer: 100% of the FLOPs
        assertTrue(
                e.getSuggestion().contains("12 filters are set by the task but cost 100.0%"),
                e.getSuggestion());
    }

    @Test
    void laterConvolutionInheritsPredecessorShapesAndIsToldToWidenIt() {
        SequentialBlock net =
                new SequentialBlock()
                        .add(
                                Conv2d.builder()
                                        .setKernelShape(new Shape(3, 3))
                                        .setFilters(12)
                                        .build())
                        .add(
                                Conv2d.builder()
                                        .setKernelShape(new Shape(3, 3))
                                        .setFilters(16)
                                        .build());
        AlignmentReport report =
                AlignmentReport.of(net, PrecisionPolicy.mixedFloat16(), new Shape(8, 16, 10, 10));
        AlignmentEntry first = report.getEntries().get(0);
        AlignmentEntry second = report.getEntries().get(1);
        assertEquals(new GemmShape(8 * 8 * 8, 12, 16 * 9), first.getGemmShape());
        assertEquals("round filters 12 -> 16", first.getSuggestion());
        assertEquals(new GemmShape(8 * 6 * 6, 16, 12 * 9), second.getGemmShape());
        assertEquals(
                "in-channels 12 -> 16: round the filters of the layer before it up to a multiple"
                        + " of 8",
                second.getSuggestion());
    }
}
