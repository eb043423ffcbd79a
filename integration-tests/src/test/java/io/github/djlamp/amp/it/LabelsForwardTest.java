package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import ai.djl.Model;
import ai.djl.basicmodelzoo.nlp.SimpleTextDecoder;
import ai.djl.basicmodelzoo.nlp.SimpleTextEncoder;
import ai.djl.engine.Engine;
import ai.djl.modality.nlp.DefaultVocabulary;
import ai.djl.modality.nlp.EncoderDecoder;
import ai.djl.modality.nlp.embedding.TrainableTextEmbedding;
import ai.djl.modality.nlp.embedding.TrainableWordEmbedding;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.recurrent.LSTM;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingConfig;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * DJL's forward with labels ({@code Trainer.forward(data, labels)}, what {@code EasyTrain} runs)
 * reaches the wrapped block: DJL's {@code EncoderDecoder} (the Seq2Seq example's network) trains,
 * and a block of the user's that reads its labels gets them through the shadow tree.
 */
class LabelsForwardTest {

    private static final int BATCH = 4;
    private static final int VOCAB = 12;

    /** TrainSeq2Seq's network, smaller: embeddings, two-layer LSTMs, a dense head. */
    private static Block seq2seq() {
        List<String> tokens = new ArrayList<>();
        for (int i = 0; i < VOCAB; i++) {
            tokens.add("t" + i);
        }
        DefaultVocabulary vocabulary = new DefaultVocabulary(tokens);
        TrainableTextEmbedding source =
                new TrainableTextEmbedding(new TrainableWordEmbedding(vocabulary, 8));
        TrainableTextEmbedding target =
                new TrainableTextEmbedding(new TrainableWordEmbedding(vocabulary, 8));
        SimpleTextEncoder encoder =
                new SimpleTextEncoder(
                        source,
                        LSTM.builder()
                                .setStateSize(8)
                                .setNumLayers(2)
                                .optDropRate(0)
                                .optBatchFirst(true)
                                .optReturnState(true)
                                .build());
        SimpleTextDecoder decoder =
                new SimpleTextDecoder(
                        target,
                        LSTM.builder()
                                .setStateSize(8)
                                .setNumLayers(2)
                                .optDropRate(0)
                                .optBatchFirst(true)
                                .optReturnState(false)
                                .build(),
                        VOCAB);
        return new EncoderDecoder(encoder, decoder);
    }

    /**
     * Source and target sentences of token ids; the labels are the decoder's input and, with DJL's
     * sparse softmax cross-entropy over the last axis, its targets (the example's
     * MaskedSoftmaxCrossEntropyLoss needs sequenceMask, which DJL's PyTorch engine lacks).
     */
    private static ArrayDataset sentences(NDManager manager) {
        NDArray sourceTokens =
                manager.randomInteger(0, VOCAB, new Shape(BATCH * 2, 10), DataType.INT64);
        NDArray targetTokens =
                manager.randomInteger(0, VOCAB, new Shape(BATCH * 2, 9), DataType.INT64);
        return new ArrayDataset.Builder()
                .setData(sourceTokens)
                .optLabels(targetTokens)
                .setSampling(BATCH, false)
                .build();
    }

    /**
     * Sparse softmax cross-entropy over the vocabulary against the first label (EncoderDecoder adds
     * the encoder's states to the labels it is given, as DJL's MaskedSoftmaxCrossEntropyLoss
     * expects; that loss needs sequenceMask, which DJL's PyTorch engine lacks).
     */
    private static final class TargetTokensLoss extends Loss {
        TargetTokensLoss() {
            super("TargetTokensLoss");
        }

        @Override
        public NDArray evaluate(NDList labels, NDList predictions) {
            NDArray logProbabilities = predictions.singletonOrThrow().logSoftmax(-1);
            NDArray targets = labels.get(0).oneHot(VOCAB);
            return logProbabilities.mul(targets).sum(new int[] {-1}).neg().mean();
        }
    }

    private static DefaultTrainingConfig config() {
        return new DefaultTrainingConfig(new TargetTokensLoss())
                .optOptimizer(Optimizer.sgd().setLearningRateTracker(Tracker.fixed(0.1f)).build());
    }

    /** Trains two batches with EasyTrain; returns the parameters' values after. */
    private static List<float[]> train(Block block, Block original) throws Exception {
        Engine.getInstance().setRandomSeed(30);
        try (Model model = Model.newInstance("seq2seq", "PyTorch")) {
            model.setBlock(block);
            TrainingConfig config =
                    block instanceof MixedPrecisionBlock wrapped
                            ? Amp.configure(config(), wrapped)
                            : config();
            try (Trainer trainer = model.newTrainer(config);
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(BATCH, 10), new Shape(BATCH, 9));
                Engine.getInstance().setRandomSeed(31);
                EasyTrain.fit(trainer, 1, sentences(data), null);
                return RealProgramsRig.values(original);
            }
        }
    }

    @Test
    void encoderDecoderTrainsAsInPlainDjlUnderMixedBfloat16() throws Exception {
        Block plainBlock = seq2seq();
        List<float[]> plain = train(plainBlock, plainBlock);
        Block original = seq2seq();
        List<float[]> wrapped = train(Amp.wrap(original, "mixed_bfloat16"), original);
        assertEquals(plain.size(), wrapped.size());
        for (int i = 0; i < plain.size(); i++) {
            // the policy runs EncoderDecoder (an opaque composite) in fp32: the same arithmetic
            // up to the rounding of the step (loss scaling, the optimizer path)
            assertArrayEquals(plain.get(i), wrapped.get(i), 1e-6f, "parameter " + i);
        }
    }

    /** A block that adds its labels' mean to its input: it fails loudly without them. */
    private static final class LabelReader extends AbstractBlock {
        Shape seenShape;
        DataType seenType;

        @Override
        protected NDList forwardInternal(
                ParameterStore parameterStore,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            if (training) {
                throw new IllegalStateException("LabelReader trains with labels only");
            }
            return inputs;
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore parameterStore,
                NDList data,
                NDList labels,
                PairList<String, Object> params) {
            seenShape = labels.head().getShape();
            seenType = labels.head().getDataType();
            return new NDList(data.head().add(labels.head().mean()));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return inputShapes;
        }
    }

    @Test
    void aUserBlockInsideASequentialBlockGetsItsLabelsUnderBf16() throws Exception {
        Engine.getInstance().setRandomSeed(32);
        LabelReader reader = new LabelReader();
        Block block = new SequentialBlock().add(Linear.builder().setUnits(3).build()).add(reader);
        try (Model model = Model.newInstance("labels", "PyTorch")) {
            MixedPrecisionBlock wrapped = Amp.wrap(block, "mixed_bfloat16");
            model.setBlock(wrapped);
            try (Trainer trainer = model.newTrainer(Amp.configure(config2(), wrapped));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(BATCH, 5));
                NDArray x = data.randomNormal(new Shape(BATCH * 2, 5));
                NDArray y = data.randomUniform(0, 3, new Shape(BATCH * 2)).floor();
                ArrayDataset dataset =
                        new ArrayDataset.Builder()
                                .setData(x)
                                .optLabels(y)
                                .setSampling(BATCH, false)
                                .build();
                EasyTrain.fit(trainer, 1, dataset, null);
                assertNotNull(reader.seenShape, "the labels reached the block");
                assertEquals(new Shape(BATCH), reader.seenShape);
                assertEquals(DataType.FLOAT32, reader.seenType, "an fp32 block's labels are fp32");
            }
        }
    }

    private static DefaultTrainingConfig config2() {
        return new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                .optOptimizer(Optimizer.sgd().setLearningRateTracker(Tracker.fixed(0.1f)).build());
    }
}
