package io.github.djlamp.amp.cast.strategy;

import ai.djl.ndarray.NDList;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.internal.BlockCopies;
import java.lang.reflect.Field;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * The shadow of a block whose forward djl-amp read as safe on bf16 arrays but which holds a child
 * that cannot share one 16-bit unit with it ({@code policy.BlockPlan.Strategy.READ}): DJL's YOLOv3
 * calls its backbone and heads, and holds upsampling lambdas djl-amp cannot read. The block's own
 * code runs, on a copy of the block whose fields hold the shadows of its children where the block
 * holds the children, so that each child computes in its own precision.
 *
 * <p>The copy is made for each forward from the block as it is then: it sees what the block's
 * fields hold now, and no two forwards share one. The reading established that the code writes no
 * field and reaches no block but through the fields that hold its registered children, so the copy
 * computes what the block would, through the shadows.
 */
public final class ReadBlockShadow extends ShadowBlock {

    private final List<Field> fields;
    private final Map<Block, Block> shadows;
    private final String path;

    /**
     * Makes the shadow of a block whose forward djl-amp read.
     *
     * @param original the user's block
     * @param shadows the shadow of each of its children, by the child
     * @param path its path in the tree
     * @throws AmpException when its fields cannot be read and written
     */
    public ReadBlockShadow(Block original, Map<Block, Block> shadows, String path) {
        super(original);
        this.fields = instanceFields(original, path);
        this.shadows = new IdentityHashMap<>(shadows);
        this.path = path;
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        if (!(parameterStore instanceof StageStore)) {
            return inner.forward(parameterStore, inputs, training, params);
        }
        return copyOverShadows().forward(parameterStore, inputs, training, params);
    }

    /** A copy of the block with each field that holds a child holding the child's shadow. */
    private Block copyOverShadows() {
        try {
            return BlockCopies.copy(
                    inner,
                    fields,
                    value -> {
                        Block shadow = value instanceof Block ? shadows.get(value) : null;
                        return shadow != null ? shadow : value;
                    });
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new AmpException(
                    "Cannot copy '"
                            + (path.isEmpty() ? "the root block" : path)
                            + "' ("
                            + inner.getClass().getName()
                            + ") to run its forward over its children's shadows ("
                            + e
                            + "): override it as fp32 in the precision policy (class:"
                            + inner.getClass().getName()
                            + "=fp32)",
                    e);
        }
    }

    private static List<Field> instanceFields(Block block, String path) {
        try {
            return BlockCopies.instanceFields(block);
        } catch (RuntimeException e) {
            throw new AmpException(
                    "Cannot read the fields of '"
                            + (path.isEmpty() ? "the root block" : path)
                            + "' ("
                            + block.getClass().getName()
                            + "), which djl-amp needs to run the block's forward over"
                            + " its children's shadows: open its package to djl-amp, or"
                            + " override it as fp32 in the precision policy ("
                            + e.getMessage()
                            + ")",
                    e);
        }
    }

    @Override
    public String toString() {
        return "read(" + (path.isEmpty() ? "root" : path) + ")";
    }
}
