package io.github.djlamp.amp.diagnostics;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.recurrent.LSTM;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.BertPretrainingBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The alignment report lists the layers djl-amp runs in 16 bits inside DJL's transformer blocks,
 * which it runs layer by layer ({@code policy.KnownComposites}): the attention projections, the
 * feed-forward layers and BERT's pooling projection, each with the GEMM its forward computes. Its
 * lambda blocks need an engine for their output shapes: hence here, not in amp-core.
 */
class TransformerAlignmentTest {

    private static final int BATCH = 2;
    private static final int SEQUENCE = 8;
    private static final int EMBEDDING = 16;
    private static final int HIDDEN = 32;

    /** The Linear layers of the report: path to (M, N, K). */
    private static Map<String, GemmShape> linearLayers(AlignmentReport report) {
        Map<String, GemmShape> layers = new LinkedHashMap<>();
        for (AlignmentEntry entry : report.getEntries()) {
            if (entry.getKind() == LayerKind.LINEAR) {
                layers.put(entry.getPath(), entry.getGemmShape());
            }
        }
        return layers;
    }

    /** The layers of one encoder block at {@code path}: (B x S, N, K) each. */
    private static Map<String, GemmShape> encoderLayers(String path) {
        long rows = (long) BATCH * SEQUENCE;
        Map<String, GemmShape> layers = new LinkedHashMap<>();
        for (String projection :
                List.of("01keyProjection", "02queryProjection", "03valueProjection")) {
            layers.put(
                    path + "/01selfAttention/" + projection,
                    new GemmShape(rows, EMBEDDING, EMBEDDING));
        }
        layers.put(
                path + "/01selfAttention/04resultProjection",
                new GemmShape(rows, EMBEDDING, EMBEDDING));
        layers.put(path + "/03outputBlock/01Linear", new GemmShape(rows, HIDDEN, EMBEDDING));
        layers.put(path + "/03outputBlock/03Linear", new GemmShape(rows, EMBEDDING, HIDDEN));
        return layers;
    }

    @Test
    void transformerEncoderBlocksListTheirProjectionsAndFeedForwardLayers() {
        SequentialBlock model =
                new SequentialBlock()
                        .add(
                                new TransformerEncoderBlock(
                                        EMBEDDING, 2, HIDDEN, 0f, Activation::relu))
                        .add(Linear.builder().setUnits(3).build());
        AlignmentReport report =
                AlignmentReport.of(
                        model,
                        PrecisionPolicy.mixedBfloat16(),
                        new Shape(BATCH, SEQUENCE, EMBEDDING));
        Map<String, GemmShape> expected = encoderLayers("01TransformerEncoderBlock");
        expected.put("02Linear", new GemmShape((long) BATCH * SEQUENCE, 3, EMBEDDING));
        assertEquals(expected, linearLayers(report), report.toTable());
    }

    @Test
    void bertListsItsEncoderBlocksAndPoolingProjection() {
        BertPretrainingBlock model =
                new BertPretrainingBlock(
                        BertBlock.builder()
                                .setTokenDictionarySize(32)
                                .optEmbeddingSize(EMBEDDING)
                                .optTransformerBlockCount(2)
                                .optAttentionHeadCount(2)
                                .optHiddenSize(HIDDEN)
                                .optMaxSequenceLength(SEQUENCE));
        Shape ids = new Shape(BATCH, SEQUENCE);
        AlignmentReport report =
                AlignmentReport.of(
                        model, PrecisionPolicy.mixedBfloat16(), ids, ids, ids, new Shape(BATCH, 2));
        // the embeddings and both heads (they end in logSoftmax) compute in fp32: not listed
        Map<String, GemmShape> expected = new LinkedHashMap<>();
        List<String> encoders = new ArrayList<>();
        encoders.add("01Bert/05transformer_0");
        encoders.add("01Bert/06transformer_1");
        for (String encoder : encoders) {
            expected.putAll(encoderLayers(encoder));
        }
        expected.put("01Bert/07poolingProjection", new GemmShape(BATCH, EMBEDDING, EMBEDDING));
        assertEquals(expected, linearLayers(report), report.toTable());
    }

    @Test
    void aBlockTheEnginesAutocastRunsIsListedAsOneLayerOfItsOwnKind() {
        SequentialBlock model =
                new SequentialBlock()
                        .add(
                                LSTM.builder()
                                        .setStateSize(8)
                                        .setNumLayers(1)
                                        .optBatchFirst(true)
                                        .build())
                        .add(Linear.builder().setUnits(3).build());
        AlignmentReport report =
                AlignmentReport.of(
                        model,
                        PrecisionPolicy.mixedBfloat16(),
                        new Shape(BATCH, SEQUENCE, EMBEDDING));
        List<String> listed = new ArrayList<>();
        for (AlignmentEntry entry : report.getEntries()) {
            listed.add(entry.getPath() + " " + entry.getKind());
        }
        // what the wrapper runs: the LSTM under libtorch's autocast where it is available
        List<String> expected = new ArrayList<>();
        if (AmpBackends.supportEngineAutocast(model.getChildren().get(0).getValue())) {
            expected.add("01LSTM " + LayerKind.UNKNOWN);
        }
        expected.add("02Linear " + LayerKind.LINEAR);
        assertEquals(expected, listed, report.toTable());
    }
}
