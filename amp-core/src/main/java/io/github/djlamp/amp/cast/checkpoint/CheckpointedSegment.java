package io.github.djlamp.amp.cast.checkpoint;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/**
 * A run of consecutive stages of a shadow SequentialBlock that a training forward pass runs without
 * recording autograd's graph, leaving its inputs and outputs on the {@link CheckpointTape}; the
 * tape runs it again with recording on after backward. Anything else (inference, a forward outside
 * a gradient collector) runs it as a plain sequence.
 */
public final class CheckpointedSegment extends AbstractBlock {

    private final List<Block> stages;
    private final List<Block> originals;
    private final String description;
    private final StageChain chain;
    private final CheckpointTape tape;
    private List<Parameter> runningStatistics;
    private List<Parameter> parameters;

    /**
     * Makes a segment.
     *
     * @param stages the shadows of the stages, in order
     * @param originals the user's blocks they shadow (for their running statistics)
     * @param description the stages' paths, for logs and errors
     * @param chain runs the stages in order
     * @param tape the tape the segment's training runs record on
     */
    public CheckpointedSegment(
            List<Block> stages,
            List<Block> originals,
            String description,
            StageChain chain,
            CheckpointTape tape) {
        this.stages = stages;
        this.originals = originals;
        this.description = description;
        this.chain = chain;
        this.tape = tape;
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        if (!training || !(parameterStore instanceof SegmentStore casting)) {
            return run(parameterStore, inputs, training, params);
        }
        AmpBackend backend = casting.backend();
        if (!backend.isRecording() || !carriesGradient(backend, inputs)) {
            // nothing in it asks for a gradient (frozen layers on inputs that need none): autograd
            // records nothing for it anyway, and there is nothing to recompute
            return run(parameterStore, inputs, training, params);
        }
        NDList outputs;
        backend.setRecording(false);
        // Results land on their first input's manager: with the inputs lent to a scope, whatever
        // the stages make and do not return goes with it, also inside blocks with their own
        // forward (a TransformerEncoderBlock), whose arrays the shadow tree cannot release.
        NDManager home = inputs.head().getManager();
        Set<NDArray> given = Collections.newSetFromMap(new IdentityHashMap<>());
        given.addAll(inputs);
        try (NDManager scope = home.newSubManager()) {
            for (NDArray input : inputs) {
                input.tempAttach(scope);
            }
            CheckpointSaving saving = tape.saving(backend);
            SegmentStore store = casting.uncached(scope, true);
            if (saving != null) {
                store = store.counting(saving);
            }
            outputs = run(store.asParameterStore(), inputs, training, params);
            if (saving != null) {
                saving.segmentEnded(scope, inputs, outputs);
            }
            for (NDArray output : outputs) {
                if (!given.contains(output)) {
                    output.attach(home);
                }
            }
        } finally {
            backend.setRecording(true);
        }
        return tape.record(this, casting, inputs, outputs, params);
    }

    /**
     * Runs the stages in order, dropping the handles to what each consumed (never {@code inputs},
     * the caller's).
     */
    NDList run(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        return chain.run(stages, parameterStore, inputs, training, params);
    }

    /**
     * Whether a gradient can flow through the segment in this forward pass: an input that needs
     * one, or a parameter of its stages that is not frozen ({@code Block.freezeParameters}, {@code
     * Parameter.freeze}; asked at every pass, as freezing may change between steps).
     */
    private boolean carriesGradient(AmpBackend backend, NDList inputs) {
        for (NDArray input : inputs) {
            if (isFloating(backend, input) && backend.requiresGradient(input)) {
                return true;
            }
        }
        for (Parameter parameter : parameters()) {
            if (parameter.requiresGradient()) {
                return true;
            }
        }
        return false;
    }

    private synchronized List<Parameter> parameters() {
        if (parameters == null) {
            List<Parameter> found = new ArrayList<>();
            for (Block original : originals) {
                for (Pair<String, Parameter> pair : original.getParameters()) {
                    found.add(pair.getValue());
                }
            }
            parameters = found;
        }
        return parameters;
    }

    /** The running statistics (BatchNorm's) of the stages, which a recomputation moves again. */
    synchronized List<Parameter> runningStatistics() {
        if (runningStatistics == null) {
            List<Parameter> found = new ArrayList<>();
            for (Block original : originals) {
                for (Pair<String, Parameter> pair : original.getParameters()) {
                    Parameter.Type type = pair.getValue().getType();
                    if (type == Parameter.Type.RUNNING_MEAN || type == Parameter.Type.RUNNING_VAR) {
                        found.add(pair.getValue());
                    }
                }
            }
            runningStatistics = found;
        }
        return runningStatistics;
    }

    /** The paths of the stages. */
    String description() {
        return description;
    }

    /** {@inheritDoc} */
    @Override
    public boolean isInitialized() {
        return true;
    }

    /** {@inheritDoc} */
    @Override
    public void initialize(NDManager manager, DataType dataType, Shape... inputShapes) {
        // the stages' blocks are initialized through the MixedPrecisionBlock, never through here
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        Shape[] shapes = inputShapes;
        for (Block stage : stages) {
            shapes = stage.getOutputShapes(shapes);
        }
        return shapes;
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return "checkpointed(" + description + ")";
    }

    /** Whether {@code array} is one of the arrays a recomputation needs a gradient for. */
    static boolean isFloating(AmpBackend backend, NDArray array) {
        return backend.precisionOf(array) != null;
    }
}
