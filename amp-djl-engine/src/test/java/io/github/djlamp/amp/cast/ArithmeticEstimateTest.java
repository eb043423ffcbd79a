package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.BertMaskedLanguageModelBlock;
import ai.djl.nn.transformer.IdEmbedding;
import io.github.djlamp.amp.policy.Precision;
import org.junit.jupiter.api.Test;

/**
 * The arithmetic of a unit djl-amp runs whole is estimated from its weights and the positions of
 * its floating inputs. A block whose first input is category indices and whose other inputs are
 * time series (DJL's DeepAR) counted 0 FLOP, so a run computing nothing in 16 bits read "0.0% of 0
 * FLOP" and the WARN that should name it stayed silent.
 */
class ArithmeticEstimateTest {

    @Test
    void aUnitIsCountedByItsFloatingInputsWhenItsFirstInputIsIndices() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block unit = Linear.builder().setUnits(8).build();
            unit.initialize(manager, DataType.FLOAT32, new Shape(4, 6, 3));
            NDList inputs =
                    new NDList(
                            manager.zeros(new Shape(4, 5), DataType.INT64), // categories
                            manager.ones(new Shape(4, 6, 3))); // 4 series of 6 steps
            ArithmeticShare share = new ArithmeticShare(Precision.BF16);
            share.record("01DeepAR", new OwnForwardStandIn(unit), Precision.FP32, inputs, inputs);
            // 2 x 24 weight elements x 24 positions
            assertEquals(2 * 24 * 24, share.getFlops(), share.toString());
            assertTrue(share.isMostlyFp32(), "the WARN names the unit: " + share);
        }
    }

    /**
     * BERT's masked-language-model head is handed the token table as an input: its rows are not
     * positions. Counted as it computes: G gathered tokens projected (E x E), then multiplied with
     * the table (D x E).
     */
    @Test
    void bertsMaskedLanguageModelHeadIsCountedAsItComputes() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            int width = 8;
            int dictionary = 500;
            BertBlock bert =
                    BertBlock.builder()
                            .micro()
                            .optEmbeddingSize(width)
                            .setTokenDictionarySize(dictionary)
                            .build();
            Block head = new BertMaskedLanguageModelBlock(bert, Activation::gelu);
            Shape sequence = new Shape(2, 16, width);
            Shape masked = new Shape(2, 3);
            Shape table = new Shape(dictionary, width);
            head.initialize(manager, DataType.FLOAT32, sequence, masked, table);
            NDList inputs =
                    new NDList(
                            manager.ones(sequence),
                            manager.zeros(masked, DataType.INT32),
                            manager.ones(table));
            ArithmeticShare share = new ArithmeticShare(Precision.BF16);
            share.record("02mlm", head, Precision.FP32, inputs, new NDList());
            // 6 gathered tokens: 2 x 6 x 8 x (8 + 500)
            assertEquals(2L * 6 * width * (width + dictionary), share.getFlops(), share.toString());
        }
    }

    @Test
    void aLookupAloneIsNotArithmetic() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block table =
                    new IdEmbedding.Builder().setDictionarySize(10).setEmbeddingSize(4).build();
            table.initialize(manager, DataType.FLOAT32, new Shape(2, 3));
            NDList tokens = new NDList(manager.zeros(new Shape(2, 3), DataType.INT64));
            ArithmeticShare share = new ArithmeticShare(Precision.BF16);
            share.record("01Lookup", new OwnForwardStandIn(table), Precision.FP32, tokens, tokens);
            assertEquals(0, share.getFlops(), share.toString());
        }
    }

    /**
     * d2l-java's {@code RNNModel} takes token indices only (it one-hot encodes them itself) and
     * counted 0 FLOP: "0.0% of 0 FLOP", no WARN, although its recurrent and linear layers ran whole
     * in fp32. Each index is a position; an embedding's table is still not counted.
     */
    @Test
    void aUnitOfTokenIndicesIsCountedByItsTokens() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block model =
                    new SequentialBlock()
                            .add(
                                    new IdEmbedding.Builder()
                                            .setDictionarySize(10)
                                            .setEmbeddingSize(8)
                                            .build())
                            .add(Linear.builder().setUnits(4).build());
            model.initialize(manager, DataType.FLOAT32, new Shape(2, 3));
            NDList tokens = new NDList(manager.zeros(new Shape(2, 3), DataType.INT64));
            ArithmeticShare share = new ArithmeticShare(Precision.BF16);
            share.record(
                    "01RNNModel", new OwnForwardStandIn(model), Precision.FP32, tokens, tokens);
            // 2 x the linear layer's 4 x 8 weights x 6 tokens; the 10 x 8 table is read, not
            // counted
            assertEquals(2 * 32 * 6, share.getFlops(), share.toString());
            assertTrue(share.isMostlyFp32(), "the WARN names the unit: " + share);
        }
    }

    /**
     * The estimate counts every weight at every input position. For linear layers that is their
     * arithmetic; a convolution after a stride runs at fewer positions, so the count is an upper
     * bound and says so: DJL's YOLOv3 as one unit at 64x64 read "about 2014.28 GFLOP" against 6.18
     * counted layer by layer.
     */
    @Test
    void aUnitHoldingAConvolutionIsCountedAsAnUpperBound() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block strided =
                    new SequentialBlock()
                            .add(
                                    ai.djl.nn.convolutional.Conv2d.builder()
                                            .setFilters(4)
                                            .setKernelShape(new Shape(3, 3))
                                            .optStride(new Shape(2, 2))
                                            .build())
                            .add(
                                    ai.djl.nn.convolutional.Conv2d.builder()
                                            .setFilters(4)
                                            .setKernelShape(new Shape(3, 3))
                                            .optStride(new Shape(2, 2))
                                            .build());
            strided.initialize(manager, DataType.FLOAT32, new Shape(1, 2, 16, 16));
            NDList image = new NDList(manager.ones(new Shape(1, 2, 16, 16)));
            ArithmeticShare share = new ArithmeticShare(Precision.BF16);
            share.record("01Net", new OwnForwardStandIn(strided), Precision.FP32, image, image);
            ArithmeticShare.Unit unit = share.getUnits().get(0);
            assertTrue(unit.isUpperBound(), unit.toString());
            assertTrue(unit.toString().contains("at most "), unit.toString());
            assertTrue(share.toString().contains("of at most "), share.toString());
            // counted layer by layer: 2 x 72 x 49 + 2 x 144 x 9; the bound counts 256 positions
            long exact = 2 * 72 * 49 + 2 * 144 * 9;
            assertTrue(unit.getFlops() >= exact, unit.getFlops() + " >= " + exact);

            Block linear = Linear.builder().setUnits(8).build();
            linear.initialize(manager, DataType.FLOAT32, new Shape(4, 6));
            NDList rows = new NDList(manager.ones(new Shape(4, 6)));
            ArithmeticShare linearShare = new ArithmeticShare(Precision.BF16);
            linearShare.record("01Mlp", new OwnForwardStandIn(linear), Precision.FP32, rows, rows);
            ArithmeticShare.Unit mlp = linearShare.getUnits().get(0);
            assertTrue(!mlp.isUpperBound() && mlp.toString().contains("about "), mlp.toString());
        }
    }

    /**
     * DJL lists no layers inside a TorchScript module, only its parameters: a traced CNN (DJL's
     * TransferFreshFruit loads a traced ResNet-18) read "100.0% of 731.83 GFLOP" with no "at most"
     * for about 2.4. A weight of three or more axes marks the convolution; a traced encoder of
     * linear layers keeps "about".
     */
    @Test
    void aTorchScriptModuleWithConvolutionKernelsIsCountedAsAnUpperBound() throws Exception {
        java.nio.file.Path fixtures =
                java.nio.file.Path.of(
                                ArithmeticEstimateTest.class
                                        .getResource("/torchscript/traced_cnn.pt")
                                        .toURI())
                        .getParent();
        try (ai.djl.Model cnn = ai.djl.Model.newInstance("traced_cnn", "PyTorch");
                ai.djl.Model encoder = ai.djl.Model.newInstance("traced_encoder", "PyTorch")) {
            cnn.load(fixtures, "traced_cnn");
            encoder.load(fixtures, "traced_encoder");
            NDManager manager = cnn.getNDManager();
            NDList image = new NDList(manager.ones(new Shape(2, 3, 16, 16)));
            ArithmeticShare share = new ArithmeticShare(Precision.BF16);
            share.record("01Traced", cnn.getBlock(), Precision.BF16, image, image);
            ArithmeticShare.Unit unit = share.getUnits().get(0);
            assertTrue(unit.isUpperBound(), unit.toString());
            assertTrue(share.toString().contains("of at most "), share.toString());
            // the fixture layer by layer: conv 3->8 at 16x16, conv 8->16 stride 2, linear 16->32
            long exact = 2 * (2L * 8 * 27 * 256 + 2L * 16 * 72 * 64 + 2L * 16 * 32);
            assertTrue(unit.getFlops() >= exact, unit.getFlops() + " >= " + exact);

            NDList tokens = new NDList(encoder.getNDManager().ones(new Shape(2, 8, 16)));
            ArithmeticShare encoderShare = new ArithmeticShare(Precision.BF16);
            encoderShare.record("01Traced", encoder.getBlock(), Precision.BF16, tokens, tokens);
            ArithmeticShare.Unit layers = encoderShare.getUnits().get(0);
            assertTrue(
                    !layers.isUpperBound() && layers.toString().contains("about "),
                    layers.toString());
        }
    }

    /** A block of its own forward around a layer: its arithmetic is estimated as a whole. */
    private static final class OwnForwardStandIn extends ai.djl.nn.AbstractBlock {
        private final Block inner;

        OwnForwardStandIn(Block inner) {
            this.inner = addChildBlock("inner", inner);
        }

        @Override
        protected NDList forwardInternal(
                ai.djl.training.ParameterStore store,
                NDList inputs,
                boolean training,
                ai.djl.util.PairList<String, Object> params) {
            return inner.forward(store, inputs, training);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return inputShapes;
        }
    }
}
