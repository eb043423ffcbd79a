package io.github.djlamp.amp.diagnostics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Which layers the policy puts in the report, and the table and CSV forms. No engine needed. */
class ReportPolicyAndFormatTest {

    private static SequentialBlock mlp() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(64).build())
                .add(Linear.builder().setUnits(10).build());
    }

    private static List<String> paths(AlignmentReport report) {
        return report.getEntries().stream().map(AlignmentEntry::getPath).toList();
    }

    @Test
    void pathOverrideToFp32RemovesTheLayer() {
        PrecisionPolicy policy =
                PrecisionPolicy.builder(PrecisionPolicy.mixedFloat16())
                        .overridePath("02Linear", CastCategory.FP32)
                        .build();
        AlignmentReport report = AlignmentReport.of(mlp(), policy, new Shape(32, 100));
        assertEquals(List.of("01Linear"), paths(report));
        // the remaining layer is now the last 16-bit layer
        assertTrue(report.getEntries().get(0).isOutputLayer());
        assertEquals(2L * 32 * 64 * 100, report.getLowPrecisionFlops());
    }

    @Test
    void classOverrideToFp32RemovesEveryLinear() {
        PrecisionPolicy policy =
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .overrideClass(Linear.class, CastCategory.FP32)
                        .build();
        SequentialBlock net =
                new SequentialBlock()
                        .add(Conv2d.builder().setKernelShape(new Shape(1, 1)).setFilters(8).build())
                        .add(Linear.builder().setUnits(8).build());
        AlignmentReport report = AlignmentReport.of(net, policy, new Shape(8, 8, 4, 4));
        assertEquals(List.of("01Conv2d"), paths(report));
    }

    @Test
    void float32PolicyReportsNothing() {
        AlignmentReport report =
                AlignmentReport.of(mlp(), PrecisionPolicy.float32(), new Shape(32, 100));
        assertTrue(report.getEntries().isEmpty());
        assertEquals(1.0, report.getAlignedFlopFraction());
        assertTrue(report.getSummary().startsWith("No layer computes in 16 bits under float32"));
        assertTrue(report.toTable().contains("No layer computes in 16 bits"), report.toTable());
    }

    @Test
    void autoPolicyReportsWhatWouldBe16Bit() {
        AlignmentReport report =
                AlignmentReport.of(mlp(), PrecisionPolicy.auto(), new Shape(32, 100));
        assertEquals(List.of("01Linear", "02Linear"), paths(report));
    }

    @Test
    void wrappedBlockUsesItsOwnPolicyOrTheGivenOne() {
        PrecisionPolicy noLastLinear =
                PrecisionPolicy.builder(PrecisionPolicy.mixedFloat16())
                        .overridePath("02Linear", CastCategory.FP32)
                        .build();
        MixedPrecisionBlock wrapped = new MixedPrecisionBlock(mlp(), noLastLinear);
        assertEquals(List.of("01Linear"), paths(AlignmentReport.of(wrapped, new Shape(32, 100))));
        assertEquals(
                List.of("01Linear", "02Linear"),
                paths(
                        AlignmentReport.of(
                                wrapped, PrecisionPolicy.mixedFloat16(), new Shape(32, 100))));
    }

    /** A leaf whose GEMM the report cannot know. */
    static final class Mystery extends AbstractBlock {
        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            return inputs;
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return inputShapes;
        }
    }

    @Test
    void unknownLowLayerIsListedWithoutDimensions() {
        PrecisionPolicy policy =
                PrecisionPolicy.builder(PrecisionPolicy.mixedFloat16())
                        .overrideClass(Mystery.class, CastCategory.LOW)
                        .build();
        SequentialBlock net =
                new SequentialBlock().add(new Mystery()).add(Linear.builder().setUnits(8).build());
        AlignmentReport report = AlignmentReport.of(net, policy, new Shape(8, 16));
        AlignmentEntry mystery = report.getEntries().get(0);
        assertEquals("01Mystery", mystery.getPath());
        assertEquals(LayerKind.UNKNOWN, mystery.getKind());
        assertEquals(AlignmentStatus.UNKNOWN, mystery.getStatus());
        assertFalse(mystery.isKnown());
        assertEquals(0, mystery.getFlops());
        assertTrue(mystery.getSuggestion().contains("cannot tell its matrix dimensions"));
        IllegalStateException e = assertThrows(IllegalStateException.class, mystery::getGemmShape);
        assertTrue(e.getMessage().contains("check isKnown() first"), e.getMessage());
        assertEquals(1, report.getUnknownCount());
        assertEquals(1, report.getAlignedCount());
        // the unknown layer adds no FLOPs: all known 16-bit FLOPs are aligned
        assertEquals(1.0, report.getAlignedFlopFraction());
        assertEquals(new GemmShape(8, 8, 16), report.getEntries().get(1).getGemmShape());
    }

    @Test
    void tableListsEveryPathWithMarksAndSummary() {
        SequentialBlock inner = new SequentialBlock().add(Linear.builder().setUnits(60).build());
        SequentialBlock net =
                new SequentialBlock().add(inner).add(Linear.builder().setUnits(10).build());
        AlignmentReport report =
                AlignmentReport.of(net, PrecisionPolicy.mixedFloat16(), new Shape(32, 100));
        String table = report.toTable();
        String[] lines = table.split("\n");
        assertTrue(
                lines[0].startsWith("Tensor Core alignment (multiples of 8) under mixed_float16"));
        assertTrue(lines[1].startsWith("path"), lines[1]);
        assertTrue(lines[2].startsWith("01SequentialBlock/01Linear"), lines[2]);
        assertTrue(lines[3].startsWith("02Linear"), lines[3]);
        // M=32 aligned, N=60 and K=100 not: marked
        assertTrue(lines[2].contains("60*") && lines[2].contains("100*"), lines[2]);
        assertTrue(lines[2].contains("round units 60 -> 64"), lines[2]);
        assertTrue(lines[2].contains(" NO "), lines[2]);
        assertEquals(report.getSummary(), lines[lines.length - 1]);
        assertTrue(lines[4].startsWith("* = not a multiple of 8."), lines[4]);
        assertTrue(lines[5].startsWith("Linear: M = rows (batch)"), lines[5]);
        // no convolution in the model: no convolution legend
        assertFalse(table.contains("Convolution (implicit GEMM)"), table);
        assertTrue(report.getSummary().startsWith("0 of 2 16-bit layers aligned, 2 misaligned"));
        assertEquals(table, report.toString());
        // no grouped layer: no groups column
        assertFalse(lines[1].contains("groups"), lines[1]);
        // the columns line up: every row has the suggestion column at the same place
        int column = lines[1].indexOf("suggestion");
        assertTrue(lines[2].substring(column).startsWith("pad in features"), lines[2]);
    }

    @Test
    void csvHasOneRowPerEntryAndQuotesFieldsWithCommas() {
        AlignmentReport report =
                AlignmentReport.of(mlp(), PrecisionPolicy.mixedFloat16(), new Shape(100, 1000));
        String[] lines = report.toCsv().split("\n");
        assertEquals(3, lines.length);
        assertTrue(lines[0].startsWith("path,layer,kind,status,m,n,k,"));
        assertTrue(
                lines[1].startsWith(
                        "01Linear,Linear,LINEAR,MISALIGNED,100,64,1000,1000,64,1,"
                                + "false,true,true,true,true,"
                                + 2L * 100 * 64 * 1000
                                + ","),
                lines[1]);
        assertTrue(lines[1].endsWith(",batch size 100 -> 104 (or 128)"), lines[1]);
        // the output layer's suggestion holds a comma ("fine, its cost is negligible"): quoted
        assertTrue(
                lines[2].endsWith(
                        "\"batch size 100 -> 104 (or 128); output layer: 10 units are set by the"
                                + " task and fine, its cost is negligible (1.0% of the 16-bit"
                                + " FLOPs)\""),
                lines[2]);
    }
}
