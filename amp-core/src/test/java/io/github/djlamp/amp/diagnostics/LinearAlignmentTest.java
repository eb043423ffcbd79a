package io.github.djlamp.amp.diagnostics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Linear layers: M, N, K read by hand, flags, suggestions and FLOPs. No engine needed. */
class LinearAlignmentTest {

    private static SequentialBlock mlp(long... units) {
        SequentialBlock block = new SequentialBlock();
        for (long u : units) {
            block.add(Linear.builder().setUnits(u).build());
        }
        return block;
    }

    @Test
    void mlpDimensionsFlagsAndFlopsByHand() {
        AlignmentReport report =
                AlignmentReport.of(mlp(64, 10), PrecisionPolicy.mixedFloat16(), new Shape(32, 100));
        List<AlignmentEntry> entries = report.getEntries();
        assertEquals(2, entries.size());

        // (32, 100) x (100, 64): M = 32 rows, N = 64 units, K = 100 in features.
        AlignmentEntry hidden = entries.get(0);
        assertEquals("01Linear", hidden.getPath());
        assertEquals("Linear", hidden.getLayerName());
        assertEquals(LayerKind.LINEAR, hidden.getKind());
        assertEquals(new GemmShape(32, 64, 100), hidden.getGemmShape());
        assertTrue(hidden.getGemmShape().isMAligned());
        assertTrue(hidden.getGemmShape().isNAligned());
        assertFalse(hidden.getGemmShape().isKAligned());
        assertEquals(100, hidden.getInChannels());
        assertEquals(64, hidden.getOutChannels());
        assertEquals(AlignmentStatus.MISALIGNED, hidden.getStatus());
        assertTrue(hidden.readsModelInput());
        assertFalse(hidden.isOutputLayer());
        assertTrue(
                hidden.getSuggestion().contains("pad in features 100 -> 104"),
                hidden.getSuggestion());
        assertFalse(hidden.getSuggestion().contains("leaving it is fine"), hidden.getSuggestion());

        // (32, 64) x (64, 10): the output layer, N = 10 classes.
        AlignmentEntry output = entries.get(1);
        assertEquals("02Linear", output.getPath());
        assertEquals(new GemmShape(32, 10, 64), output.getGemmShape());
        assertFalse(output.getGemmShape().isNAligned());
        assertFalse(output.readsModelInput());
        assertTrue(output.isOutputLayer());

        long hiddenFlops = 2L * 32 * 64 * 100;
        long outputFlops = 2L * 32 * 10 * 64;
        assertEquals(hiddenFlops, hidden.getFlops());
        assertEquals(outputFlops, output.getFlops());
        assertEquals(hiddenFlops + outputFlops, report.getLowPrecisionFlops());
        assertEquals(0, report.getAlignedFlops());
        assertEquals(0.0, report.getAlignedFlopFraction());
        assertEquals(
                (double) outputFlops / (hiddenFlops + outputFlops), output.getFlopShare(), 1e-12);
        // 9% of the FLOPs: not negligible, so padding is suggested.
        assertTrue(
                output.getSuggestion().contains("pad 10 -> 16 and ignore the extra outputs"),
                output.getSuggestion());
        assertEquals(0, report.getAlignedCount());
        assertEquals(2, report.getMisalignedCount());
        assertEquals(0, report.getUnknownCount());
    }

    @Test
    void alignedFlopFractionMatchesAnIndependentSum() {
        // (64, 128) -> 256 (aligned) -> 60 (units misaligned) -> 10 (K = 60 misaligned).
        AlignmentReport report =
                AlignmentReport.of(
                        mlp(256, 60, 10), PrecisionPolicy.mixedBfloat16(), new Shape(64, 128));
        long a = 2L * 64 * 256 * 128;
        long b = 2L * 64 * 60 * 256;
        long c = 2L * 64 * 10 * 60;
        assertEquals(
                List.of(true, false, false),
                report.getEntries().stream().map(AlignmentEntry::isAligned).toList());
        double fraction = report.getAlignedFlopFraction();
        assertEquals((double) a / (a + b + c), fraction, 1e-12);
        assertTrue(fraction > 0 && fraction < 1, "fraction " + fraction);
        assertEquals(1, report.getAlignedCount());
        assertEquals(2, report.getNotAligned().size());

        AlignmentEntry narrow = report.getEntries().get(1);
        assertEquals("round units 60 -> 64", narrow.getSuggestion());
        AlignmentEntry output = report.getEntries().get(2);
        assertTrue(
                output.getSuggestion().contains("in features 60 -> 64: round the width of the"),
                output.getSuggestion());
        // 10 units cost c / (a + b + c) = 1.4%: negligible.
        assertTrue(
                output.getSuggestion().contains("10 units are set by the task and fine"),
                output.getSuggestion());
        assertTrue(output.getSuggestion().contains("negligible"), output.getSuggestion());
    }

    @Test
    void batchSizeSuggestionOffersMultipleOfEightAndPowerOfTwo() {
        AlignmentReport report =
                AlignmentReport.of(mlp(64), PrecisionPolicy.mixedFloat16(), new Shape(100, 64));
        AlignmentEntry e = report.getEntries().get(0);
        assertEquals(new GemmShape(100, 64, 64), e.getGemmShape());
        assertFalse(e.isAligned());
        assertEquals("batch size 100 -> 104 (or 128)", e.getSuggestion());
    }

    @Test
    void leadingDimensionsMultiplyIntoM() {
        AlignmentReport aligned =
                AlignmentReport.of(mlp(64), PrecisionPolicy.mixedFloat16(), new Shape(8, 13, 64));
        assertEquals(new GemmShape(104, 64, 64), aligned.getEntries().get(0).getGemmShape());
        assertTrue(aligned.getEntries().get(0).isAligned());

        AlignmentReport odd =
                AlignmentReport.of(mlp(64), PrecisionPolicy.mixedFloat16(), new Shape(4, 13, 64));
        AlignmentEntry e = odd.getEntries().get(0);
        assertEquals(52, e.getGemmShape().getM());
        assertTrue(e.getSuggestion().startsWith("rows (product of the input's leading"));
        assertTrue(e.getSuggestion().contains("52 -> 56 (or 64)"), e.getSuggestion());
    }

    @Test
    void alignedLayerHasNoSuggestion() {
        AlignmentReport report =
                AlignmentReport.of(mlp(64, 32), PrecisionPolicy.mixedFloat16(), new Shape(16, 8));
        assertEquals(2, report.getAlignedCount());
        assertEquals(1.0, report.getAlignedFlopFraction());
        report.getEntries().forEach(e -> assertEquals("", e.getSuggestion()));
    }

    @Test
    void nestedContainersGiveFullPaths() {
        SequentialBlock inner = mlp(16);
        SequentialBlock outer =
                new SequentialBlock().add(inner).add(Linear.builder().setUnits(8).build());
        AlignmentReport report =
                AlignmentReport.of(outer, PrecisionPolicy.mixedFloat16(), new Shape(8, 24));
        assertEquals(
                List.of("01SequentialBlock/01Linear", "02Linear"),
                report.getEntries().stream().map(AlignmentEntry::getPath).toList());
        assertEquals(new GemmShape(8, 8, 16), report.getEntries().get(1).getGemmShape());
        assertTrue(report.getEntries().get(0).readsModelInput());
        assertFalse(report.getEntries().get(1).readsModelInput());
    }

    @Test
    void aLinearRootIsReportedUnderTheEmptyPath() {
        AlignmentReport report =
                AlignmentReport.of(
                        Linear.builder().setUnits(12).build(),
                        PrecisionPolicy.mixedFloat16(),
                        new Shape(8, 16));
        AlignmentEntry e = report.getEntries().get(0);
        assertEquals("", e.getPath());
        assertEquals(new GemmShape(8, 12, 16), e.getGemmShape());
        assertTrue(report.toTable().contains("(root)"), report.toTable());
    }
}
