package io.github.djlamp.amp.policy;

import ai.djl.nn.Block;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.BertPretrainingBlock;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import java.util.Set;

/**
 * DJL's blocks with a forward of their own that djl-amp runs layer by layer, as PyTorch's autocast
 * reaches the operations inside any module: djl-amp knows what their forward computes, so it runs
 * an equivalent forward whose layers each get their own category (the projections and feed-forward
 * layers in 16 bits, normalization as its input arrives) and whose attention products compute in 16
 * bits with softmax in fp32.
 *
 * <p>Only the exact classes: a subclass may override forward, and then it is a composite of unknown
 * content like any other.
 */
public final class KnownComposites {

    private static final Set<Class<?>> MIRRORED =
            Set.of(
                    ScaledDotProductAttentionBlock.class,
                    TransformerEncoderBlock.class,
                    BertBlock.class,
                    BertPretrainingBlock.class);

    private KnownComposites() {}

    /**
     * Returns whether djl-amp runs {@code block} layer by layer through a forward equivalent to
     * DJL's.
     *
     * @param block a block
     * @return true for DJL's {@code TransformerEncoderBlock}, {@code
     *     ScaledDotProductAttentionBlock}, {@code BertBlock} and {@code BertPretrainingBlock}
     *     themselves, not their subclasses
     */
    public static boolean isMirrored(Block block) {
        return block != null && MIRRORED.contains(block.getClass());
    }
}
