package io.github.djlamp.amp.diagnostics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** ResNetV1 from DJL's model zoo: the stem is flagged, the residual stages are aligned. */
class ResNetAlignmentTest {

    private static Block resnet(int layers, Shape image) {
        return ResNetV1.builder().setImageShape(image).setNumLayers(layers).setOutSize(10).build();
    }

    private static List<String> convAndLinearPaths(Block root) {
        return BlockPaths.walk(root).entrySet().stream()
                .filter(e -> e.getValue() instanceof Conv2d || e.getValue() instanceof Linear)
                .map(e -> e.getKey())
                .collect(Collectors.toList());
    }

    @Test
    void resnet20At28x28() {
        Block block = resnet(20, new Shape(1, 28, 28));
        AlignmentReport report =
                AlignmentReport.of(block, PrecisionPolicy.mixedFloat16(), new Shape(64, 1, 28, 28));
        System.out.println(report.toTable());
        List<AlignmentEntry> entries = report.getEntries();

        // every convolution and linear layer of the tree, in DJL's order, and nothing else
        assertEquals(
                convAndLinearPaths(block),
                entries.stream().map(AlignmentEntry::getPath).collect(Collectors.toList()));

        AlignmentEntry stem = entries.get(0);
        assertEquals("01Conv2d", stem.getPath());
        assertEquals(new GemmShape(64L * 28 * 28, 16, 9), stem.getGemmShape());
        assertEquals(1, stem.getInChannels());
        assertFalse(stem.isInChannelsAligned());
        assertTrue(stem.readsModelInput());
        assertTrue(
                stem.getSuggestion().startsWith("pad in-channels 1 -> 8 with zero channels"),
                stem.getSuggestion());
        // the stem is cheap: 50176 x 16 x 9 against 50176 x 16 x 144 for each 3x3 conv after it
        long allFlops = entries.stream().mapToLong(AlignmentEntry::getFlops).sum();
        assertEquals((double) stem.getFlops() / allFlops, stem.getFlopShare(), 1e-12);
        assertTrue(stem.getFlopShare() < 0.01, "stem share " + stem.getFlopShare());
        assertTrue(
                stem.getSuggestion().endsWith("of the 16-bit FLOPs, leaving it is fine"),
                stem.getSuggestion());

        List<AlignmentEntry> residualConvs = entries.subList(1, entries.size() - 1);
        for (AlignmentEntry conv : residualConvs) {
            assertEquals(LayerKind.CONVOLUTION, conv.getKind(), conv.toString());
            assertTrue(conv.isAligned(), conv.toString());
            assertEquals("", conv.getSuggestion());
            assertFalse(conv.readsModelInput(), conv.toString());
        }
        // the stages: 16 channels at 28x28, 32 at 14x14, 64 at 7x7
        assertTrue(
                residualConvs.stream()
                        .anyMatch(
                                e ->
                                        e.getGemmShape()
                                                .equals(new GemmShape(64L * 28 * 28, 16, 16 * 9))));
        assertTrue(
                residualConvs.stream()
                        .anyMatch(
                                e ->
                                        e.getGemmShape()
                                                .equals(new GemmShape(64L * 14 * 14, 32, 16 * 9))));
        assertTrue(
                residualConvs.stream()
                        .anyMatch(
                                e ->
                                        e.getGemmShape()
                                                .equals(new GemmShape(64L * 7 * 7, 64, 64 * 9))));
        // the 1x1 stride-2 shortcut into the last stage
        assertTrue(
                residualConvs.stream()
                        .anyMatch(
                                e -> e.getGemmShape().equals(new GemmShape(64L * 7 * 7, 64, 32))));

        AlignmentEntry classifier = entries.get(entries.size() - 1);
        assertEquals(LayerKind.LINEAR, classifier.getKind());
        assertEquals(new GemmShape(64, 10, 64), classifier.getGemmShape());
        assertTrue(classifier.isOutputLayer());
        assertTrue(
                classifier.getSuggestion().contains("10 units are set by the task and fine"),
                classifier.getSuggestion());

        long total = entries.stream().mapToLong(AlignmentEntry::getFlops).sum();
        long aligned =
                entries.stream()
                        .filter(AlignmentEntry::isAligned)
                        .mapToLong(AlignmentEntry::getFlops)
                        .sum();
        assertEquals(total, report.getLowPrecisionFlops());
        double fraction = report.getAlignedFlopFraction();
        assertEquals((double) aligned / total, fraction, 1e-12);
        assertTrue(fraction > 0 && fraction < 1, "fraction " + fraction);
        assertEquals(entries.size() - 2, report.getAlignedCount());
        assertEquals(2, report.getMisalignedCount());

        String table = report.toTable();
        assertTrue(table.contains("\nConvolution (implicit GEMM): M = batch x output positions"));
        assertTrue(table.contains("\nLinear: M = rows (batch)"));
        for (AlignmentEntry e : entries) {
            assertTrue(table.contains(e.getPath()), e.getPath());
        }
    }

    @Test
    void resnet18At3x32x32FlagsOnlyTheStemAndClassifier() {
        Block block = resnet(18, new Shape(3, 32, 32));
        AlignmentReport report =
                AlignmentReport.of(
                        block, PrecisionPolicy.mixedBfloat16(), new Shape(32, 3, 32, 32));
        List<AlignmentEntry> notAligned = report.getNotAligned();
        assertEquals(2, notAligned.size(), report.toTable());
        AlignmentEntry stem = notAligned.get(0);
        assertEquals("01Conv2d", stem.getPath());
        assertEquals(new GemmShape(32L * 32 * 32, 64, 27), stem.getGemmShape());
        assertTrue(stem.getSuggestion().startsWith("pad in-channels 3 -> 8"), stem.getSuggestion());
        assertEquals(LayerKind.LINEAR, notAligned.get(1).getKind());
        assertTrue(notAligned.get(1).isOutputLayer());
        // DJL's ResNetV1-18 at 32x32 uses bottleneck units of 16 to 512 channels: all aligned
        assertTrue(
                report.getEntries().stream()
                        .filter(e -> e.getKind() == LayerKind.CONVOLUTION && e != stem)
                        .allMatch(AlignmentEntry::isAligned),
                report.toTable());
    }

    @Test
    void wrappedBlockAndPathOverride() {
        Block block = resnet(20, new Shape(1, 28, 28));
        Shape input = new Shape(64, 1, 28, 28);
        AlignmentReport plain = AlignmentReport.of(block, PrecisionPolicy.mixedFloat16(), input);
        MixedPrecisionBlock wrapped = Amp.wrap(block, "mixed_float16");
        AlignmentReport viaWrapper = AlignmentReport.of(wrapped, input);
        assertEquals(plain.toCsv(), viaWrapper.toCsv());

        String classifierPath = plain.getEntries().get(plain.getEntries().size() - 1).getPath();
        PrecisionPolicy fp32Classifier =
                PrecisionPolicy.builder(PrecisionPolicy.mixedFloat16())
                        .overridePath(classifierPath, CastCategory.FP32)
                        .build();
        AlignmentReport withoutClassifier = AlignmentReport.of(block, fp32Classifier, input);
        assertEquals(plain.getEntries().size() - 1, withoutClassifier.getEntries().size());
        assertTrue(
                withoutClassifier.getEntries().stream()
                        .noneMatch(e -> e.getPath().equals(classifierPath)));
        assertEquals(1, withoutClassifier.getMisalignedCount());
    }
}
