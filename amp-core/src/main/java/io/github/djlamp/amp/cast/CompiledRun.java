package io.github.djlamp.amp.cast;

import ai.djl.Device;
import ai.djl.engine.EngineException;
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
import io.github.djlamp.amp.cast.strategy.InputPrecisions;
import io.github.djlamp.amp.compile.ForwardGraph;
import io.github.djlamp.amp.compile.ForwardGraphBuilder;
import io.github.djlamp.amp.compile.GraphPlan;
import io.github.djlamp.amp.compile.NotCompilableException;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.CompiledForward;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Consecutive children of a SequentialBlock that djl-amp can compile, in the shadow tree: one
 * native call of the engine for their whole forward. The first forward of each input signature
 * (shape, whether the input is 16-bit, training or not) runs their eager shadows, where their
 * kernels are checked, their arithmetic counted and their WARNs said; the run is then compiled from
 * the plan and from what those checks decided (a layer the check kept in fp32 is fp32 in the graph,
 * in the layout its check chose), and later forwards of that signature run compiled. The backward
 * stays the engine's autograd.
 */
final class CompiledRun extends AbstractBlock {

    private static final Logger LOG = LoggerFactory.getLogger(MixedPrecisionBlock.class);

    /**
     * An input signature: the graph's casts and BatchNorm's mode depend on it ({@code maskShape}
     * null where the run takes no mask).
     */
    private record Signature(Shape shape, Shape maskShape, boolean inputLow, boolean training) {}

    /**
     * What a signature got: its graph once its first forward ran, the compiled forward from its
     * second on, or why it runs eagerly.
     */
    private record Outcome(
            Signature signature, CompiledForward forward, ForwardGraph graph, String refusal) {

        /** A signature whose first forward ran eagerly, its graph not planned yet. */
        static Outcome seen(Signature signature) {
            return new Outcome(signature, null, null, null);
        }

        boolean isUnplanned() {
            return graph == null && forward == null && refusal == null;
        }

        boolean isUncompiled() {
            return graph != null && forward == null && refusal == null;
        }
    }

    private final List<Block> eager;
    private final List<Pair<String, Block>> originals;
    private final GraphPlan plan;
    private final boolean masked;
    private final IntermediateRelease release;
    private final AmpBackend backend;
    private final Map<Signature, Outcome> outcomes = new ConcurrentHashMap<>();
    private volatile Outcome last;
    private volatile boolean ranCompiled;
    private volatile InputPrecisions inputPrecision;

    /**
     * Makes the run.
     *
     * @param eager the children's shadows, run for each new signature and where compiling fails
     * @param originals the children, each with its path, as the graph is made from them
     * @param plan what the wrapper and the checks of the eager forwards decided, which the graph
     *     follows
     * @param masked whether the run is DJL's BERT encoder stack, each block taking the one before's
     *     output and the attention mask's offsets
     */
    CompiledRun(
            List<Block> eager,
            List<Pair<String, Block>> originals,
            GraphPlan plan,
            boolean masked,
            IntermediateRelease release,
            AmpBackend backend) {
        this.eager = List.copyOf(eager);
        this.originals = List.copyOf(originals);
        this.plan = plan;
        this.masked = masked;
        this.release = release;
        this.backend = backend;
    }

    /** Returns the paths of the first and last child this run covers. */
    String describe() {
        String first = originals.get(0).getKey();
        String end = originals.get(originals.size() - 1).getKey();
        return originals.size() == 1 ? first : first + " .. " + end;
    }

    /** Whether this run's children lie inside the block at {@code path}. */
    boolean isInside(String path) {
        return originals.get(0).getKey().startsWith(path + BlockPaths.SEPARATOR);
    }

    /** Whether a forward ran compiled. */
    boolean hasRunCompiled() {
        return ranCompiled;
    }

    /** Why the last signature runs eagerly, or null. */
    String refusal() {
        Outcome outcome = last;
        return outcome == null ? null : outcome.refusal();
    }

    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        return forward(parameterStore, inputs, null, training, params);
    }

    /** With labels: the children the graph covers ignore them, as their eager forwards do. */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList data,
            NDList labels,
            PairList<String, Object> params) {
        return forward(parameterStore, data, labels, true, params);
    }

    private NDList forward(
            ParameterStore store,
            NDList inputs,
            NDList labels,
            boolean training,
            PairList<String, Object> params) {
        if (inputs.size() != (masked ? 2 : 1) || !(store instanceof CastingParameterStore)) {
            return eager(store, inputs, labels, training, params);
        }
        CastingParameterStore casting = (CastingParameterStore) store;
        NDArray input = inputs.head();
        Precision precision = inputPrecisions().of(0, input);
        if (precision == null) {
            return eager(store, inputs, labels, training, params);
        }
        boolean inputLow = precision.isReduced();
        Shape maskShape = masked ? inputs.get(1).getShape() : null;
        Outcome outcome = last;
        if (outcome == null
                || !matches(outcome.signature(), input, maskShape, inputLow, training)) {
            Signature signature = new Signature(input.getShape(), maskShape, inputLow, training);
            outcome = outcomes.get(signature);
            if (outcome == null) {
                // the signature's first forward: eager, and what its checks decided is kept
                NDList outputs = eager(store, inputs, labels, training, params);
                outcomes.put(signature, Outcome.seen(signature));
                return outputs;
            }
            last = outcome;
        }
        if (outcome.isUnplanned()) {
            // planned at the second forward, not between the first and its backward: what the
            // planning allocates may bring a collection there, and DJL's operations with a Java
            // number leave backward a buffer a collection frees (README, "DJL defects")
            outcome = plan(outcome.signature(), casting.computePrecision());
            outcomes.put(outcome.signature(), outcome);
            last = outcome;
        }
        if (outcome.isUncompiled()) {
            // the second: a run inside a run that covers it is never called again, so only a
            // run that is called twice is worth compiling
            outcome = compile(outcome);
            outcomes.put(outcome.signature(), outcome);
            last = outcome;
        }
        if (outcome.forward() == null) {
            return eager(store, inputs, labels, training, params);
        }
        List<Parameter> parameters = outcome.graph().parameters();
        NDList values = new NDList(parameters.size());
        ParameterStore masters = casting.delegate();
        Device device = input.getDevice();
        for (Parameter parameter : parameters) {
            values.add(masters.getValue(parameter, device, training));
        }
        NDArray output;
        try {
            output = outcome.forward().forward(inputs, values, training);
        } catch (EngineException e) {
            // a device or input the module cannot run: this signature runs eagerly from now on
            Outcome refused = refused(outcome.signature(), e.getMessage(), true);
            outcomes.put(refused.signature(), refused);
            last = refused;
            return eager(store, inputs, labels, training, params);
        }
        ranCompiled = true;
        NDManager step = casting.stepManager();
        if (output.getManager() != step) {
            output.attach(step);
        }
        return new NDList(output);
    }

    private static boolean matches(
            Signature signature,
            NDArray input,
            Shape maskShape,
            boolean inputLow,
            boolean training) {
        return signature.training() == training
                && signature.inputLow() == inputLow
                && signature.shape().equals(input.getShape())
                && Objects.equals(signature.maskShape(), maskShape);
    }

    /** The children's shadows, as their container runs them. */
    private NDList eager(
            ParameterStore store,
            NDList inputs,
            NDList labels,
            boolean training,
            PairList<String, Object> params) {
        if (!masked) {
            return release.chain(eager, store, inputs, labels, training, params);
        }
        // as DJL's BertBlock runs its encoders: each on the one before's output and the mask, in
        // a scope of its own
        NDArray mask = inputs.get(1);
        NDList last = new NDList(inputs.head());
        for (Block encoder : eager) {
            NDList input = new NDList(last.head(), mask);
            try (NDManager scope = NDManager.subManagerOf(input)) {
                scope.tempAttachAll(input);
                last = scope.ret(encoder.forward(store, input, training));
            }
        }
        return last;
    }

    private InputPrecisions inputPrecisions() {
        InputPrecisions known = inputPrecision;
        if (known == null) {
            known = new InputPrecisions(backend);
            inputPrecision = known;
        }
        return known;
    }

    /** The graph of a signature as its eager forward ran it, or why there is none. */
    private Outcome plan(Signature signature, Precision compute) {
        try {
            ForwardGraph graph =
                    masked
                            ? ForwardGraphBuilder.ofMaskedEncoders(
                                    originals, plan, compute, signature.inputLow())
                            : ForwardGraphBuilder.of(
                                    originals, plan, compute, signature.inputLow());
            return new Outcome(signature, null, graph, null);
        } catch (NotCompilableException e) {
            return refused(signature, e.getMessage(), false);
        }
    }

    private Outcome compile(Outcome planned) {
        try {
            CompiledForward forward = backend.compileForward(planned.graph());
            return new Outcome(planned.signature(), forward, planned.graph(), null);
        } catch (UnsupportedOperationException e) {
            return refused(planned.signature(), e.getMessage(), false);
        } catch (AmpException | EngineException e) {
            return refused(planned.signature(), e.getMessage(), true);
        }
    }

    /**
     * A signature that runs eagerly: said as a WARN where the engine failed, as INFO where it has
     * no compiled forward at all.
     */
    private Outcome refused(Signature signature, String refusal, boolean failed) {
        String line = "djl-amp: compiled forward: {} runs eagerly at input {}: {}";
        if (failed) {
            LOG.warn(line, describe(), signature.shape(), refusal);
        } else {
            LOG.info(line, describe(), signature.shape(), refusal);
        }
        return new Outcome(signature, null, null, refusal);
    }

    @Override
    public boolean isInitialized() {
        return true;
    }

    @Override
    public void initialize(NDManager manager, DataType dataType, Shape... inputShapes) {}

    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        if (masked) {
            return new Shape[] {inputShapes[0]};
        }
        Shape[] shapes = inputShapes;
        for (Pair<String, Block> child : originals) {
            shapes = child.getValue().getOutputShapes(shapes);
        }
        return shapes;
    }
}
