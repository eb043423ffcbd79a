package io.github.djlamp.amp.cast;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.compile.ForwardGraph;
import io.github.djlamp.amp.compile.ForwardGraphBuilder;
import io.github.djlamp.amp.compile.NotCompilableException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.CompiledForward;
import io.github.djlamp.amp.verify.KernelVerdict;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The wrapper's compiled forward (a prototype, off unless {@link
 * MixedPrecisionBlock#compileForward(boolean)} turns it on): the whole tree's forward as one native
 * call of the engine, made at the first forward on each device. A tree it cannot compile (a block
 * with no compiled form, checkpointing on, an engine that cannot) runs as before, and the first
 * forward says once why. A forward with labels (DJL's {@code Trainer}) runs as a training forward:
 * DJL's containers hand the labels to their children, and every leaf the graph accepts ignores
 * them.
 */
final class CompiledForwards {

    private static final Logger LOG = LoggerFactory.getLogger(MixedPrecisionBlock.class);

    /** What one device got: the compiled forward and the graph, or why not. */
    private record Outcome(CompiledForward forward, ForwardGraph graph, String refusal) {}

    private volatile boolean enabled;
    private final Map<Device, Outcome> outcomes = new ConcurrentHashMap<>();
    private final Set<Device> checked = ConcurrentHashMap.newKeySet();

    void setEnabled(boolean on) {
        enabled = on;
    }

    boolean isEnabled() {
        return enabled;
    }

    /** Whether the tree's forward on {@code device} ran compiled. */
    boolean isCompiled(Device device) {
        Outcome outcome = outcomes.get(device);
        return outcome != null && outcome.forward() != null;
    }

    /**
     * Why the tree runs eagerly on {@code device}, or null when it runs compiled or has not run.
     */
    String refusal(Device device) {
        Outcome outcome = outcomes.get(device);
        return outcome == null ? null : outcome.refusal();
    }

    /**
     * Runs the compiled forward, or returns null when the tree runs as before on this device.
     *
     * @param compute the precision of convolutions and linear layers (the policy's compute one)
     * @param checkedKernels the wrapper's kernel verdicts where its 16-bit kernels are checked,
     *     else null
     */
    NDList forward(
            Block original,
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            boolean checkpointing,
            Precision compute,
            boolean channelsLast,
            Supplier<List<KernelVerdict>> checkedKernels,
            AmpBackend backend) {
        Device device = inputs.head().getDevice();
        if (checkedKernels != null && !outcomes.containsKey(device) && checked.add(device)) {
            // the first forward runs eagerly: its 16-bit kernels are checked against fp32 there,
            // and the compiled forward is made only if every one of them was trusted
            return null;
        }
        Outcome outcome =
                outcomes.computeIfAbsent(
                        device,
                        d ->
                                compile(
                                        original,
                                        inputs,
                                        checkpointing,
                                        compute,
                                        channelsLast,
                                        distrusted(checkedKernels, d),
                                        backend));
        if (outcome.forward() == null) {
            return null;
        }
        NDList values = new NDList(outcome.graph().parameters().size());
        for (Parameter parameter : outcome.graph().parameters()) {
            values.add(parameterStore.getValue(parameter, device, training));
        }
        NDArray output = outcome.forward().forward(inputs.singletonOrThrow(), values, training);
        return new NDList(output);
    }

    /** The first kernel the check kept in fp32 on {@code device}, said as a refusal, or null. */
    private static String distrusted(Supplier<List<KernelVerdict>> checkedKernels, Device device) {
        if (checkedKernels == null) {
            return null;
        }
        for (KernelVerdict verdict : checkedKernels.get()) {
            if (device.equals(verdict.getDevice()) && !verdict.runsLowPrecision()) {
                return "the kernel check kept "
                        + verdict.getPaths()
                        + " in fp32 ("
                        + String.join("; ", verdict.getFindings())
                        + "); the compiled forward runs every convolution and linear layer in "
                        + verdict.getPrecision().shortName();
            }
        }
        return null;
    }

    private static Outcome compile(
            Block original,
            NDList inputs,
            boolean checkpointing,
            Precision compute,
            boolean channelsLast,
            String distrusted,
            AmpBackend backend) {
        String refusal = null;
        ForwardGraph graph = null;
        CompiledForward forward = null;
        if (inputs.size() != 1) {
            refusal = "the forward takes " + inputs.size() + " inputs, the compiled one takes one";
        } else if (checkpointing) {
            refusal = "checkpointing is on";
        } else if (distrusted != null) {
            refusal = distrusted;
        } else {
            try {
                graph = ForwardGraphBuilder.of(original, compute, channelsLast);
                forward = backend.compileForward(graph);
            } catch (NotCompilableException | UnsupportedOperationException e) {
                refusal = e.getMessage();
            }
        }
        if (refusal == null) {
            LOG.info(
                    "djl-amp: compiled forward: {} runs as one native call ({} operations, "
                            + "convolutions and linear layers in {})",
                    original.getClass().getSimpleName(),
                    graph.operations().size(),
                    compute.shortName());
        } else {
            LOG.warn("djl-amp: compiled forward refused, the model runs eagerly: {}", refusal);
        }
        return new Outcome(forward, graph, refusal);
    }
}
