package io.github.djlamp.amp.cast;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.policy.CastCategory;

/**
 * One leaf of the shadow tree: runs the user's block in the precision its {@link CastCategory}
 * gives it.
 *
 * <ul>
 *   <li>{@link CastCategory#LOW}: floating inputs cast to the compute precision; WEIGHT and BIAS
 *       read through the casting store;
 *   <li>{@link CastCategory#FP32}: floating inputs cast to fp32; parameters as they are;
 *   <li>{@link CastCategory#PASS_THROUGH}: inputs and parameters as they are.
 * </ul>
 */
final class PrecisionStage extends AbstractBlock {

    private final Block inner;
    private final CastCategory category;
    private final String path;

    PrecisionStage(Block inner, CastCategory category, String path) {
        this.inner = inner;
        this.category = category;
        this.path = path;
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        if (!(parameterStore instanceof CastingParameterStore)) {
            return inner.forward(parameterStore, inputs, training, params);
        }
        CastingParameterStore casting = (CastingParameterStore) parameterStore;
        switch (category) {
            case LOW:
                return forwardAndReleaseCasts(
                        casting, casting.toLow(inputs), inputs, training, params);
            case FP32:
                return forwardAndReleaseCasts(
                        casting.delegate(), casting.toFp32(inputs), inputs, training, params);
            default:
                return inner.forward(casting.delegate(), inputs, training, params);
        }
    }

    /** Runs the block on cast inputs, then drops the handles to the casts it has consumed. */
    private NDList forwardAndReleaseCasts(
            ParameterStore store,
            NDList cast,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        NDList outputs = inner.forward(store, cast, training, params);
        IntermediateRelease.closeConsumed(cast, inputs, outputs);
        return outputs;
    }

    /** {@inheritDoc} */
    @Override
    public boolean isInitialized() {
        return inner.isInitialized();
    }

    /** {@inheritDoc} */
    @Override
    public void initialize(NDManager manager, DataType dataType, Shape... inputShapes) {
        // The wrapped block is initialized through the MixedPrecisionBlock, never through here.
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        return inner.getOutputShapes(inputShapes);
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return category.configName() + "(" + (path.isEmpty() ? "root" : path) + ")";
    }
}
