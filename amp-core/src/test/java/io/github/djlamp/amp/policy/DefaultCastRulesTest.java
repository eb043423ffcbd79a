package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.modality.nlp.DefaultVocabulary;
import ai.djl.modality.nlp.embedding.TrainableWordEmbedding;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv1d;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.convolutional.Conv2dTranspose;
import ai.djl.nn.convolutional.Conv3d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.norm.GhostBatchNorm;
import ai.djl.nn.norm.LayerNorm;
import ai.djl.nn.pooling.Pool;
import ai.djl.nn.recurrent.GRU;
import ai.djl.nn.recurrent.LSTM;
import ai.djl.nn.recurrent.RNN;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.BertNextSentenceBlock;
import ai.djl.nn.transformer.IdEmbedding;
import ai.djl.nn.transformer.PointwiseFeedForwardBlock;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.util.PairList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class DefaultCastRulesTest {

    private static void assertCategory(CastCategory expected, Block block, String reasonPart) {
        assertEquals(expected, DefaultCastRules.categoryOf(block), block.toString());
        String reason = DefaultCastRules.reasonFor(block);
        assertTrue(reason.contains(reasonPart), () -> "reason was: " + reason);
    }

    @Test
    void convolutionsAndLinearAreLow() {
        assertCategory(
                CastCategory.LOW,
                Conv1d.builder().setKernelShape(new Shape(3)).setFilters(4).build(),
                "convolution");
        assertCategory(
                CastCategory.LOW,
                Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(4).build(),
                "convolution");
        assertCategory(
                CastCategory.LOW,
                Conv3d.builder().setKernelShape(new Shape(3, 3, 3)).setFilters(4).build(),
                "convolution");
        assertCategory(CastCategory.LOW, Linear.builder().setUnits(10).build(), "linear");
        assertCategory(CastCategory.LOW, new TestBlocks.MyLinear(), "linear");
    }

    @Test
    void transposedConvolutionStaysFp32() {
        Block deconv =
                Conv2dTranspose.builder().setKernelShape(new Shape(3, 3)).setFilters(4).build();
        assertCategory(CastCategory.FP32, deconv, "transposed convolution");
    }

    @Test
    void batchNormAndDropoutPassThrough() {
        assertCategory(
                CastCategory.PASS_THROUGH, BatchNorm.builder().build(), "batch normalization");
        assertCategory(
                CastCategory.PASS_THROUGH, GhostBatchNorm.builder().build(), "batch normalization");
        assertCategory(
                CastCategory.PASS_THROUGH, Dropout.builder().optRate(0.5f).build(), "dropout");
    }

    @Test
    void layerNormIsFp32() {
        assertCategory(CastCategory.FP32, LayerNorm.builder().build(), "layer normalization");
    }

    @Test
    void djlActivationPoolingAndFlattenLambdasPassThrough() {
        List<Block> safe =
                List.of(
                        Activation.reluBlock(),
                        Activation.relu6Block(),
                        Activation.sigmoidBlock(),
                        Activation.tanhBlock(),
                        Activation.softPlusBlock(),
                        Activation.softSignBlock(),
                        Activation.leakyReluBlock(0.1f),
                        Activation.eluBlock(1f),
                        Activation.seluBlock(),
                        Activation.geluBlock(),
                        Activation.swishBlock(1f),
                        Activation.mishBlock(),
                        Pool.maxPool1dBlock(new Shape(2)),
                        Pool.maxPool2dBlock(new Shape(2, 2)),
                        Pool.maxPool3dBlock(new Shape(2, 2, 2)),
                        Pool.globalMaxPool2dBlock(),
                        Pool.avgPool2dBlock(new Shape(2, 2)),
                        Pool.globalAvgPool1dBlock(),
                        Pool.globalAvgPool2dBlock(),
                        Pool.globalAvgPool3dBlock(),
                        Pool.lpPool2dBlock(2f, new Shape(2, 2)),
                        Pool.globalLpPool2dBlock(2f),
                        Blocks.batchFlattenBlock(),
                        Blocks.batchFlattenBlock(10),
                        Blocks.identityBlock());
        for (Block block : safe) {
            assertCategory(CastCategory.PASS_THROUGH, block, "DJL activation, pooling or reshape");
        }
    }

    @Test
    void otherLambdasAreFp32() {
        PairList<DataType, Shape> shapes = new PairList<>();
        shapes.add(DataType.FLOAT32, new Shape(1));
        List<Block> unknown =
                List.of(
                        new LambdaBlock(x -> UnknownCode.same(x)),
                        new LambdaBlock(x -> UnknownCode.same(x), LambdaBlock.DEFAULT_NAME),
                        new LambdaBlock(
                                x -> new NDList(x.singletonOrThrow().softmax(-1)), "softmax"),
                        new LambdaBlock(
                                x -> UnknownCode.same(x), "ReLU"), // a name is not a function
                        LambdaBlock.singleton(a -> UnknownCode.sameArray(a)),
                        Blocks.onesBlock(shapes, new String[] {"ones"}),
                        // DJL names, left out: no bf16 CPU kernel / unsupported by the engine
                        Pool.avgPool3dBlock(new Shape(2, 2, 2)),
                        Pool.lpPool3dBlock(2f, new Shape(2, 2, 2)),
                        Pool.globalLpPool3dBlock(2f));
        for (Block block : unknown) {
            assertCategory(CastCategory.FP32, block, "lambda of unknown content");
        }
    }

    @Test
    void exactSequentialAndParallelAreContainers() {
        assertCategory(CastCategory.CONTAINER, new SequentialBlock(), "SequentialBlock");
        assertCategory(
                CastCategory.CONTAINER,
                new ParallelBlock(UnknownCode::first, List.of(Activation.reluBlock())),
                "ParallelBlock");
    }

    @Test
    void subclassOfSequentialIsAnOpaqueComposite() {
        TestBlocks.MySequential seq = new TestBlocks.MySequential();
        assertCategory(CastCategory.FP32, seq, "unknown leaf");
        seq.add(Linear.builder().setUnits(2).build());
        assertCategory(CastCategory.FP32, seq, "opaque composite");
    }

    @Test
    void subclassThatKeepsTheForwardIsAContainer() {
        assertCategory(CastCategory.CONTAINER, new TestBlocks.NamedSequential(), "SequentialBlock");
        Block mlp = new ai.djl.basicmodelzoo.basic.Mlp(4, 2, new int[] {8});
        assertCategory(CastCategory.CONTAINER, mlp, "SequentialBlock");
    }

    @Test
    void embeddingIsFp32() {
        Block embedding =
                TrainableWordEmbedding.builder()
                        .setVocabulary(new DefaultVocabulary(List.of("a", "b", "c")))
                        .setEmbeddingSize(4)
                        .build();
        assertCategory(CastCategory.FP32, embedding, "embedding");
        // BERT's embeddings are no AbstractEmbedding: they were given the transformer rule's
        // reason ("uses softmax and layer normalization"; DJL's TrainBertOnGoemotions)
        Block bertTokens =
                new IdEmbedding.Builder().setDictionarySize(10).setEmbeddingSize(4).build();
        assertCategory(CastCategory.FP32, bertTokens, "embedding: a lookup");
    }

    @Test
    void recurrentLayersAreFp32() {
        assertCategory(
                CastCategory.FP32,
                LSTM.builder().setStateSize(4).setNumLayers(1).build(),
                "recurrent");
        assertCategory(
                CastCategory.FP32,
                GRU.builder().setStateSize(4).setNumLayers(1).build(),
                "recurrent");
        assertCategory(
                CastCategory.FP32,
                RNN.builder().setStateSize(4).setNumLayers(2).build(),
                "recurrent");
    }

    @Test
    void djlsTransformerBlocksRunLayerByLayerAndTheirSubclassesAreOpaque() {
        assertCategory(
                CastCategory.CONTAINER,
                new TransformerEncoderBlock(8, 2, 16, 0.1f, Activation::relu),
                "layer by layer");
        assertCategory(
                CastCategory.CONTAINER,
                ScaledDotProductAttentionBlock.builder()
                        .setEmbeddingSize(8)
                        .setHeadCount(2)
                        .build(),
                "layer by layer");
        // a subclass may compute otherwise: djl-amp does not know its forward
        assertCategory(
                CastCategory.FP32,
                new TransformerEncoderBlock(8, 2, 16, 0.1f, Activation::relu) {},
                "transformer");
        assertCategory(
                CastCategory.CONTAINER,
                BertBlock.builder().micro().setTokenDictionarySize(16).build(),
                "layer by layer");
        // the rest of DJL's transformer package stays fp32 as a whole: both heads end in logSoftmax
        assertCategory(CastCategory.FP32, new BertNextSentenceBlock(), "transformer");
        // a SequentialBlock subclass that keeps its forward: its Linear layers can run low
        assertCategory(
                CastCategory.CONTAINER,
                new PointwiseFeedForwardBlock(List.of(16), 8, Activation::relu),
                "SequentialBlock");
    }

    @Test
    void unknownBlocksAreFp32() {
        assertCategory(CastCategory.FP32, new TestBlocks.Leaf(), "unknown leaf");
        assertCategory(CastCategory.FP32, Activation.preluBlock(), "unknown leaf");
        assertCategory(
                CastCategory.FP32,
                new TestBlocks.Composite(Linear.builder().setUnits(2).build()),
                "opaque composite");
    }

    @Test
    void defaultsDoNotDependOnPaths() {
        Map<String, Block> all = BlockPaths.walk(TestBlocks.tree());
        assertEquals(CastCategory.CONTAINER, DefaultCastRules.categoryOf(all.get("")));
        assertEquals(CastCategory.LOW, DefaultCastRules.categoryOf(all.get("01Linear")));
        assertEquals(
                CastCategory.PASS_THROUGH, DefaultCastRules.categoryOf(all.get("03LambdaBlock")));
    }

    /** A user's leaf declared safe by its author. */
    static final class MarkedLeaf extends TestBlocks.Leaf implements LowPrecisionSafe {}

    @Test
    void onlyBlocksTheRulesKnowAreSafeIn16BitsOnNobodysWord() {
        assertTrue(DefaultCastRules.knowsSafeIn16Bits(Linear.builder().setUnits(4).build()));
        assertTrue(
                DefaultCastRules.knowsSafeIn16Bits(
                        Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(4).build()));
        assertTrue(DefaultCastRules.knowsSafeIn16Bits(BatchNorm.builder().build()));
        assertTrue(DefaultCastRules.knowsSafeIn16Bits(Activation.reluBlock()));
        assertTrue(DefaultCastRules.knowsSafeIn16Bits(new SequentialBlock()));
        assertEquals(CastCategory.LOW, DefaultCastRules.categoryOf(new MarkedLeaf()));
        assertFalse(
                DefaultCastRules.knowsSafeIn16Bits(new MarkedLeaf()),
                "LOW only on its author's word");
        assertFalse(DefaultCastRules.knowsSafeIn16Bits(new TestBlocks.Leaf()));
        assertFalse(
                DefaultCastRules.knowsSafeIn16Bits(
                        new LambdaBlock(list -> UnknownCode.same(list))));
    }
}
