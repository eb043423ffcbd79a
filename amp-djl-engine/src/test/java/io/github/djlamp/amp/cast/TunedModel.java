package io.github.djlamp.amp.cast;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.core.Linear;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;

/**
 * DJL's transfer-learning shape written as a block of the user's own: the loaded module and a new
 * head, its forward handing one to the other. djl-amp reads that forward as safe on bf16 arrays,
 * and the engine's autocast runs the block whole (a 16-bit unit could not: the module holds its own
 * fp32 weights).
 */
public final class TunedModel extends AbstractBlock {
    private final Block backbone;
    private final Block head;

    public TunedModel(Block backbone) {
        this.backbone = addChildBlock("backbone", backbone);
        this.head = addChildBlock("head", Linear.builder().setUnits(3).build());
    }

    @Override
    protected NDList forwardInternal(
            ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
        return head.forward(store, backbone.forward(store, inputs, training), training);
    }

    @Override
    protected void initializeChildBlocks(
            NDManager manager, DataType dataType, Shape... inputShapes) {
        backbone.initialize(manager, dataType, inputShapes);
        head.initialize(manager, dataType, backbone.getOutputShapes(inputShapes));
    }

    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        return head.getOutputShapes(backbone.getOutputShapes(inputShapes));
    }
}
