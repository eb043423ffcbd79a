package io.github.djlamp.amp.cast.strategy;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.BertPretrainingBlock;
import ai.djl.util.PairList;
import java.util.Map;

/**
 * DJL's {@link BertPretrainingBlock} (DJL's TrainBertOnCode) run layer by layer: the BERT core
 * through its shadow ({@link BertShadow}), the next-sentence and masked-language heads as their
 * stages decide (fp32 by default: both end in logSoftmax). The embedding table the masked-language
 * head reads is the fp32 master. In fp32 the result is bitwise DJL's.
 */
public final class BertPretrainingShadow extends MirroredComposite {

    private final BertBlock bert;
    private final Block bertShadow;
    private final Block maskedLanguage;
    private final Block nextSentence;
    private final String path;

    /**
     * Makes the shadow of a BERT pretraining block.
     *
     * @param original the user's block
     * @param bert its BERT core (the user's), whose token embedding the masked-language head reads
     * @param shadows the shadows of its children, by the names DJL added them under
     * @param path its path in the tree
     * @param release drops the handles to what each step consumed
     */
    public BertPretrainingShadow(
            BertPretrainingBlock original,
            BertBlock bert,
            Map<String, Block> shadows,
            String path,
            StageRelease release) {
        super(original, release);
        this.bert = bert;
        this.bertShadow = child(original, shadows, "Bert");
        this.maskedLanguage = child(original, shadows, "BertMaskedLanguageModelBlock");
        this.nextSentence = child(original, shadows, "BertNextSentenceBlock");
        this.path = path;
    }

    @Override
    NDList forwardMirrored(
            StageStore store, NDList inputs, boolean training, PairList<String, Object> params) {
        NDArray tokenIds = inputs.get(0);
        NDArray typeIds = inputs.get(1);
        NDArray sequenceMasks = inputs.get(2);
        NDArray maskedIndices = inputs.get(3);
        try (NDManager scope = NDManager.subManagerOf(tokenIds)) {
            scope.tempAttachAll(inputs);
            NDList bertResult =
                    bertShadow.forward(
                            store, new NDList(tokenIds, typeIds, sequenceMasks), training);
            NDArray embeddedSequence = bertResult.get(0);
            NDArray pooledOutput = bertResult.get(1);
            NDArray nextSentenceProbabilities =
                    nextSentence
                            .forward(store, new NDList(pooledOutput), training)
                            .singletonOrThrow();
            NDArray embeddingTable =
                    bert.getTokenEmbedding()
                            .getValue(store.delegate(), embeddedSequence.getDevice(), training);
            NDArray logProbs =
                    maskedLanguage
                            .forward(
                                    store,
                                    new NDList(embeddedSequence, maskedIndices, embeddingTable),
                                    training)
                            .singletonOrThrow();
            return scope.ret(new NDList(nextSentenceProbabilities, logProbs));
        }
    }

    @Override
    public String toString() {
        return "bertPretraining(" + (path.isEmpty() ? "root" : path) + ")";
    }
}
