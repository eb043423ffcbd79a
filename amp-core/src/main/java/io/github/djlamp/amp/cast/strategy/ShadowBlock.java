package io.github.djlamp.amp.cast.strategy;

import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;

/**
 * A block of the shadow tree that stands for one block of the user's tree: it shares that block's
 * parameters and initialization and answers for its shapes; only its forward differs.
 */
public abstract class ShadowBlock extends AbstractBlock {

    /** The user's block this one stands for. */
    protected final Block inner;

    /**
     * Makes the shadow of {@code inner}.
     *
     * @param inner the user's block this one stands for
     */
    protected ShadowBlock(Block inner) {
        this.inner = inner;
    }

    /** {@inheritDoc} */
    @Override
    public boolean isInitialized() {
        return inner.isInitialized();
    }

    /** {@inheritDoc} */
    @Override
    public void initialize(NDManager manager, DataType dataType, Shape... inputShapes) {
        // The user's block is initialized through the MixedPrecisionBlock, never through here.
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        return inner.getOutputShapes(inputShapes);
    }
}
