package io.github.djlamp.amp.cast.strategy;

import ai.djl.ndarray.NDList;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import java.util.Map;

/**
 * The shadow of a DJL block whose forward djl-amp knows ({@link
 * io.github.djlamp.amp.policy.KnownComposites}): the same computation as DJL's forward, with the
 * block's children replaced by their shadows, so that each layer inside computes in its own
 * precision. Shares every block and parameter with the original and is only ever used for forward.
 */
public abstract class MirroredComposite extends ShadowBlock {

    /** Drops the handles to what each step of the forward consumed. */
    protected final StageRelease release;

    MirroredComposite(Block original, StageRelease release) {
        super(original);
        this.release = release;
    }

    /**
     * Returns the shadow of {@code original}'s child {@code name}.
     *
     * @throws IllegalStateException when the block has no such child (another DJL version)
     */
    static Block child(Block original, Map<String, Block> shadows, String name) {
        Block shadow = shadows.get(name);
        if (shadow == null) {
            throw new IllegalStateException(
                    original.getClass().getName()
                            + " has no child named '"
                            + name
                            + "' (children: "
                            + shadows.keySet()
                            + "): djl-amp's copy of its forward does not fit this DJL version;"
                            + " override the class as fp32 in the precision policy");
        }
        return shadow;
    }

    /** {@inheritDoc} */
    @Override
    protected final NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        if (!(parameterStore instanceof StageStore)) {
            return inner.forward(parameterStore, inputs, training, params);
        }
        return forwardMirrored((StageStore) parameterStore, inputs, training, params);
    }

    /** DJL's forward of the block, through the shadows of its children. */
    abstract NDList forwardMirrored(
            StageStore store, NDList inputs, boolean training, PairList<String, Object> params);
}
