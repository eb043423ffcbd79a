package io.github.djlamp.amp.cast;

import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.BlockList;
import ai.djl.nn.Parameter;
import ai.djl.nn.ParameterList;
import ai.djl.training.ParameterStore;
import ai.djl.training.initializer.Initializer;
import ai.djl.util.PairList;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.Map;
import java.util.function.Predicate;

/**
 * A block that is another block in every respect but forward (both of DJL's training forwards, with
 * labels and without, are the subclass's {@code forwardInternal}): the same parameters with the
 * same names, the same initialization, the same saved parameter file, the same children.
 *
 * <p>It is an {@link AbstractBlock}, as nearly every DJL block is, so that code written against
 * that class keeps working on a wrapped block: d2l-java's training loops call {@code
 * ((AbstractBlock) net).forward(...)}. AbstractBlock's own state (its children and parameters)
 * stays empty; every method that would read it goes to the original instead.
 */
abstract class ForwardingBlock extends AbstractBlock {

    /** The block everything but forward goes to. */
    final Block original;

    ForwardingBlock(Block original) {
        this.original = original;
    }

    /**
     * The forward with labels is the subclass's too: {@link AbstractBlock}'s default would drop the
     * labels on the way to the forward without them, and blocks that need labels in training (DJL's
     * {@code EncoderDecoder}) refuse that.
     *
     * @param parameterStore the parameter store
     * @param data the input data
     * @param labels the labels
     * @param params optional parameters
     * @return the outputs
     */
    @Override
    protected abstract NDList forwardInternal(
            ParameterStore parameterStore,
            NDList data,
            NDList labels,
            PairList<String, Object> params);

    /** {@inheritDoc} */
    @Override
    public void setInitializer(Initializer initializer, Parameter.Type type) {
        original.setInitializer(initializer, type);
    }

    /** {@inheritDoc} */
    @Override
    public void setInitializer(Initializer initializer, String paramName) {
        original.setInitializer(initializer, paramName);
    }

    /** {@inheritDoc} */
    @Override
    public void setInitializer(Initializer initializer, Predicate<Parameter> predicate) {
        original.setInitializer(initializer, predicate);
    }

    /** {@inheritDoc} */
    @Override
    public void initialize(NDManager manager, DataType dataType, Shape... inputShapes) {
        original.initialize(manager, dataType, inputShapes);
    }

    /** {@inheritDoc} */
    @Override
    public boolean isInitialized() {
        return original.isInitialized();
    }

    /** {@inheritDoc} */
    @Override
    public void cast(DataType dataType) {
        original.cast(dataType);
    }

    /** {@inheritDoc} */
    @Override
    public void clear() {
        original.clear();
    }

    /** {@inheritDoc} */
    @Override
    public PairList<String, Shape> describeInput() {
        return original.describeInput();
    }

    /** {@inheritDoc} */
    @Override
    public BlockList getChildren() {
        return original.getChildren();
    }

    /** {@inheritDoc} */
    @Override
    public ParameterList getDirectParameters() {
        return original.getDirectParameters();
    }

    /** {@inheritDoc} */
    @Override
    public ParameterList getParameters() {
        return original.getParameters();
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        return original.getOutputShapes(inputShapes);
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes, DataType[] inputDataTypes) {
        return original.getOutputShapes(inputShapes, inputDataTypes);
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getInputShapes() {
        return original.getInputShapes();
    }

    /** {@inheritDoc} */
    @Override
    public DataType[] getOutputDataTypes() {
        return original.getOutputDataTypes();
    }

    /** {@inheritDoc} */
    @Override
    public void saveParameters(DataOutputStream os) throws IOException {
        original.saveParameters(os);
    }

    /** {@inheritDoc} */
    @Override
    public void loadParameters(NDManager manager, DataInputStream is)
            throws IOException, MalformedModelException {
        original.loadParameters(manager, is);
    }

    /** {@inheritDoc} */
    @Override
    public void freezeParameters(boolean freeze) {
        original.freezeParameters(freeze);
    }

    /** {@inheritDoc} */
    @Override
    public void freezeParameters(boolean freeze, Predicate<Parameter> pred) {
        original.freezeParameters(freeze, pred);
    }

    /** {@inheritDoc} */
    @Override
    public Map<String, String> getCustomMetadata() {
        return original.getCustomMetadata();
    }
}
