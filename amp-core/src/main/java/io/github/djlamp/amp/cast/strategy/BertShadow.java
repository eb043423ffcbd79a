package io.github.djlamp.amp.cast.strategy;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.util.PairList;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * DJL's {@link BertBlock} run layer by layer: the embeddings, their sum and BatchNorm as DJL runs
 * them (fp32), each encoder block through its shadow ({@link TransformerEncoderShadow}), and the
 * pooling projection as its stage decides, its tanh in fp32. The position embedding is read from
 * the trainer's store, never cast: embeddings stay fp32, as under PyTorch's autocast. DJL's scoped
 * managers are kept, so what each encoder block makes is freed as in DJL. In fp32 the result is
 * bitwise DJL's.
 */
public final class BertShadow extends MirroredComposite {

    private final Block tokenEmbedding;
    private final Block typeEmbedding;
    private final Parameter positionEmbedding;
    private final Block embeddingNorm;
    private final Block embeddingDropout;
    private final List<Block> encoders = new ArrayList<>();
    private final Block encoderStack;
    private final Block pooling;
    private final String path;

    /**
     * Makes the shadow of a BERT block.
     *
     * @param original the user's block
     * @param shadows the shadows of its children, by the names DJL added them under
     * @param encoderStack the encoder blocks as one block taking the output before them and the
     *     attention mask's offsets (a compiled run), or null to run them one by one
     * @param path its path in the tree
     * @param release drops the handles to what each step consumed
     */
    public BertShadow(
            BertBlock original,
            Map<String, Block> shadows,
            Block encoderStack,
            String path,
            StageRelease release) {
        super(original, release);
        this.tokenEmbedding = child(original, shadows, "tokenEmbedding");
        this.typeEmbedding = child(original, shadows, "typeEmbedding");
        this.positionEmbedding = original.getDirectParameters().get("positionEmbedding");
        if (positionEmbedding == null) {
            throw new IllegalStateException(
                    "BertBlock has no parameter 'positionEmbedding': djl-amp's copy of its forward"
                            + " does not fit this DJL version; override the class as fp32 in the"
                            + " precision policy");
        }
        this.embeddingNorm = child(original, shadows, "embeddingNorm");
        this.embeddingDropout = child(original, shadows, "embeddingDropout");
        for (int i = 0; shadows.containsKey("transformer_" + i); i++) {
            encoders.add(shadows.get("transformer_" + i));
        }
        this.encoderStack = encoderStack;
        this.pooling = child(original, shadows, "poolingProjection");
        this.path = path;
    }

    @Override
    NDList forwardMirrored(
            StageStore store, NDList inputs, boolean training, PairList<String, Object> params) {
        NDArray tokenIds = inputs.get(0);
        NDArray typeIds = inputs.get(1);
        NDArray masks = inputs.get(2);
        NDManager initScope = NDManager.subManagerOf(tokenIds);
        initScope.tempAttachAll(inputs);
        NDArray embeddedTokens =
                tokenEmbedding.forward(store, new NDList(tokenIds), training).singletonOrThrow();
        NDArray embeddedTypes =
                typeEmbedding.forward(store, new NDList(typeIds), training).singletonOrThrow();
        NDArray embeddedPositions =
                store.delegate().getValue(positionEmbedding, tokenIds.getDevice(), training);
        NDArray embedding = embeddedTokens.add(embeddedTypes).add(embeddedPositions);
        NDList normalized = embeddingNorm.forward(store, new NDList(embedding), training);
        NDList dropped = embeddingDropout.forward(store, normalized, training);
        NDArray attentionMask = BertBlock.createAttentionMaskFromInputMask(tokenIds, masks);
        Shape maskShape = attentionMask.getShape();
        NDArray offsetMask =
                attentionMask
                        .reshape(maskShape.get(0), 1, maskShape.get(1), maskShape.get(2))
                        .toType(DataType.FLOAT32, false)
                        .mul(-1f)
                        .add(1f)
                        .mul(-100000f);
        NDList lastOutput = dropped;
        initScope.ret(lastOutput);
        initScope.ret(offsetMask);
        initScope.close();
        for (Block encoder : encoderStack == null ? encoders : List.of(encoderStack)) {
            NDList input = new NDList(lastOutput.head(), offsetMask);
            try (NDManager innerScope = NDManager.subManagerOf(input)) {
                innerScope.tempAttachAll(input);
                lastOutput = innerScope.ret(encoder.forward(store, input, training));
            }
        }
        NDArray firstToken = lastOutput.head().get(new NDIndex(":,1,:")).squeeze();
        NDList pooled = pooling.forward(store, new NDList(firstToken), training);
        NDArray pooledFirstToken = store.toFp32(pooled).head().tanh();
        lastOutput.add(pooledFirstToken);
        return lastOutput;
    }

    @Override
    public String toString() {
        return "bert(" + (path.isEmpty() ? "root" : path) + ")";
    }
}
