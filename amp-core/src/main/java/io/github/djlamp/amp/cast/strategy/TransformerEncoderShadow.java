package io.github.djlamp.amp.cast.strategy;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.nn.Block;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.util.PairList;
import io.github.djlamp.amp.internal.DjlSeam;
import java.util.Map;

/**
 * DJL's {@link TransformerEncoderBlock} run layer by layer: attention ({@link AttentionShadow}),
 * dropout, the residual sum, BatchNorm, the feed-forward layers, dropout, the residual sum and
 * BatchNorm, each through its shadow. The residual sums add a 16-bit branch to the block's fp32
 * input and are fp32, as under PyTorch's autocast. The arithmetic is DJL's, step for step: in fp32
 * the result is bitwise DJL's.
 */
public final class TransformerEncoderShadow extends MirroredComposite {

    private final Block attention;
    private final Dropout attentionDropout;
    private final Block attentionNorm;
    private final Block feedForward;
    private final Dropout feedForwardDropout;
    private final Block outputNorm;
    private final String path;

    /**
     * Makes the shadow of a transformer encoder block.
     *
     * @param original the user's block
     * @param shadows the shadows of its children, by the names DJL added them under
     * @param path its path in the tree
     * @param release drops the handles to what each step consumed
     */
    public TransformerEncoderShadow(
            TransformerEncoderBlock original,
            Map<String, Block> shadows,
            String path,
            StageRelease release) {
        super(original, release);
        Dropout[] dropouts = DjlSeam.encoderDropouts(original);
        this.attention = child(original, shadows, "selfAttention");
        this.attentionDropout = dropouts[0];
        this.attentionNorm = child(original, shadows, "attentionNorm");
        this.feedForward = child(original, shadows, "outputBlock");
        this.feedForwardDropout = dropouts[1];
        this.outputNorm = child(original, shadows, "outputNorm");
        this.path = path;
    }

    @Override
    NDList forwardMirrored(
            StageStore store, NDList inputs, boolean training, PairList<String, Object> params) {
        NDArray embedding = inputs.head();
        NDList attended = attention.forward(store, inputs, training, null);
        NDList dropped = attentionDropout.forward(store, attended, training, null);
        NDList withResidual = new NDList(dropped.singletonOrThrow().add(embedding));
        release.closeConsumed(new NDList(attended).addAll(dropped), inputs);
        NDList normalized = attentionNorm.forward(store, withResidual, training, null);
        release.closeConsumed(withResidual, inputs, normalized);
        NDList fed = feedForward.forward(store, normalized, training, null);
        release.closeConsumed(normalized, inputs, fed);
        NDList fedDropped = feedForwardDropout.forward(store, fed, training, null);
        NDList outputWithResidual = new NDList(fedDropped.singletonOrThrow().add(embedding));
        release.closeConsumed(new NDList(fed).addAll(fedDropped), inputs);
        NDList output = outputNorm.forward(store, outputWithResidual, training, null);
        release.closeConsumed(outputWithResidual, inputs, output);
        return output;
    }

    @Override
    public String toString() {
        return "transformerEncoder(" + (path.isEmpty() ? "root" : path) + ")";
    }
}
