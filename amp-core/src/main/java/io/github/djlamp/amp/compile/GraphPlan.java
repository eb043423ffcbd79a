package io.github.djlamp.amp.compile;

import ai.djl.nn.Block;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Convolution;
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import io.github.djlamp.amp.policy.CastCategory;

/**
 * What the wrapper decided for each block of a compiled graph, by the block's path (as {@code
 * BlockPaths} writes it): the policy's category, and for 16-bit layers what their kernel check
 * decided, so that the graph computes each operation in the precision and layout its eager stage
 * does.
 */
public interface GraphPlan {

    /** One of the two products of DJL's attention. */
    enum AttentionProduct {
        /** The queries times the transposed keys. */
        SCORES,
        /** The attention weights times the values. */
        WEIGHTED_VALUES
    }

    /** The layout a cast to 16 bits gives an array. */
    enum Layout {
        /** The layout it has. */
        AS_IT_IS,
        /** Contiguous. */
        CONTIGUOUS,
        /** Channels-last where it has four dimensions, the layout it has otherwise. */
        CHANNELS_LAST
    }

    /**
     * How a unit computes: a block the wrapper runs as one 16-bit stage that is not itself a layer
     * (a block whose own forward djl-amp reads, a container overridden as low).
     *
     * @param low whether it runs in 16 bits: false where the kernel check of a layer inside it put
     *     the whole unit in fp32
     * @param layout the layout of its 16-bit input and of its convolutions' weights
     * @param relayout whether an input already 16-bit is cast to that layout too
     */
    record UnitCast(boolean low, Layout layout, boolean relayout) {}

    /**
     * Returns how the wrapper runs the block at {@code path}.
     *
     * @param path the block's path
     * @param block the block
     * @return its category ({@link CastCategory#CONTAINER} for a plain container), or null where
     *     the wrapper runs it neither as one stage nor as a container (under the engine's autocast,
     *     or its own code read over its children)
     */
    CastCategory categoryOf(String path, Block block);

    /**
     * Returns whether the ParallelBlock at {@code path} joins its branches in fp32.
     *
     * @param path the block's path
     * @return true where the plan casts the branches' outputs to fp32 before the join
     */
    boolean fp32Join(String path);

    /**
     * Returns whether the 16-bit layer at {@code path} runs in 16 bits: false where its kernel
     * check kept it in fp32.
     *
     * @param path the layer's path
     * @return true where it runs in the compute precision
     */
    boolean runsLow(String path);

    /**
     * Returns whether the 16-bit 2-D convolution at {@code path} takes channels-last operands.
     *
     * @param path the layer's path
     * @return true for channels-last
     */
    boolean channelsLast(String path);

    /**
     * Returns whether DJL's attention at {@code path} casts the operands of its two products to the
     * compute precision (else to fp32).
     *
     * @param path the attention block's path
     * @return true where its products are planned in 16 bits
     */
    boolean lowProducts(String path);

    /**
     * Returns whether a product that the attention at {@code path} plans in 16 bits runs in them:
     * false where its kernel check found it wrong and it runs in fp32.
     *
     * @param path the attention block's path
     * @param product which product
     * @return true where it runs in the compute precision
     */
    boolean productRunsLow(String path, AttentionProduct product);

    /**
     * Returns how the 16-bit unit at {@code path} computes.
     *
     * @param path the unit's path
     * @return its precision and its input's cast
     */
    UnitCast unitCast(String path);

    /**
     * Returns the plan that runs every convolution and linear layer in 16 bits, attention's
     * products too, every other block on what reaches it, as djl-amp's default rules do with
     * nothing checked, every operand in the layout it has.
     *
     * @return the plan
     */
    static GraphPlan defaults() {
        return new GraphPlan() {
            @Override
            public CastCategory categoryOf(String path, Block block) {
                if (block instanceof SequentialBlock
                        || block instanceof ParallelBlock
                        || block instanceof ScaledDotProductAttentionBlock
                        || block instanceof TransformerEncoderBlock) {
                    return CastCategory.CONTAINER;
                }
                return block instanceof Convolution || block instanceof Linear
                        ? CastCategory.LOW
                        : CastCategory.PASS_THROUGH;
            }

            @Override
            public boolean fp32Join(String path) {
                return false;
            }

            @Override
            public boolean runsLow(String path) {
                return true;
            }

            @Override
            public boolean channelsLast(String path) {
                return false;
            }

            @Override
            public boolean lowProducts(String path) {
                return true;
            }

            @Override
            public UnitCast unitCast(String path) {
                return new UnitCast(true, Layout.AS_IT_IS, false);
            }

            @Override
            public boolean productRunsLow(String path, AttentionProduct product) {
                return true;
            }
        };
    }
}
