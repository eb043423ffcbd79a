package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.util.Pair;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.spi.AmpBackend;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The optimizer's state in a file: the buffers of every parameter (SGD's momentum, Adam's moments,
 * ...) and DJL's update counts, keyed by parameter name, so that a run resumes on either path
 * (DJL's per-parameter update or the fused step) from a file either wrote. The optimizer's {@link
 * FusedOptimizerKind} says which buffers it keeps (DJL's private maps, in the fused step's order),
 * its code in the header and the factor from the fused path's first buffer to DJL's. Counts and
 * buffers mean what they mean to DJL's optimizers, except that the first buffer is kept as the
 * saving path holds it (a fused SGD with a fixed rate keeps the rate out of its momentum), with the
 * factor that makes it DJL's, so that the same path resumes bit for bit. DJL's optimizers keep
 * their state in private fields, read and written through {@link DjlOptimizers}. The file's
 * encoding is {@link SavedOptimizerState}'s.
 */
final class OptimizerStateFile {

    private OptimizerStateFile() {}

    static void save(AmpSession session, LossScalingOptimizer optimizer, Path file)
            throws IOException {
        SavedOptimizerState state = new SavedOptimizerState();
        Optimizer inner = optimizer.getInner();
        FusedOptimizerKind kind = requireKind(inner);
        state.optimizer = kind.stateFileCode();
        AmpBackend backend = session.getBackend();
        Map<String, String> names = names(session);
        FusedUpdate fused = optimizer.fusedUpdate();
        if (fused != null) {
            state.buffersPerParameter = fused.bufferCount();
            // kept as this path holds it, so that it resumes here bit for bit
            state.momentumToDjl = fused.momentumToDjl();
            for (Map.Entry<String, NDArray[]> entry : fused.buffers().entrySet()) {
                String name = names.get(entry.getKey());
                if (name != null && entry.getValue().length > 0) {
                    put(state, name, entry.getValue(), backend);
                }
            }
            NDArray count = fused.counter().count();
            int begin = (int) DjlOptimizers.read(inner, Optimizer.class, "beginNumUpdate");
            fused.counter()
                    .appliedSteps(backend)
                    .forEach(
                            (id, steps) -> {
                                if (names.containsKey(id) && steps > 0) {
                                    state.counts.put(names.get(id), begin + steps);
                                }
                            });
            state.numUpdate = count == null ? 0 : FusedUpdateCount.read(backend, count);
        } else {
            List<Map<String, Map<Device, NDArray>>> maps = djlBuffers(kind, inner);
            state.buffersPerParameter = maps.size();
            for (Map.Entry<String, String> id : names.entrySet()) {
                NDArray[] buffers = new NDArray[maps.size()];
                for (int b = 0; b < maps.size(); b++) {
                    Map<Device, NDArray> perDevice = maps.get(b).get(id.getKey());
                    buffers[b] = perDevice == null ? null : perDevice.values().iterator().next();
                }
                if (buffers.length > 0 && buffers[0] != null) {
                    put(state, id.getValue(), buffers, backend);
                }
            }
            Map<String, Integer> counts = djlCounts(inner);
            names.forEach(
                    (id, name) -> {
                        Integer count = counts.get(id);
                        if (count != null) {
                            state.counts.put(name, (long) count);
                        }
                    });
            state.numUpdate = (int) DjlOptimizers.read(inner, Optimizer.class, "numUpdate");
        }
        state.write(file);
    }

    /**
     * Loads the state; {@code reload} says an earlier state was loaded with no step since, so its
     * buffers and counts may be replaced.
     */
    static void load(AmpSession session, LossScalingOptimizer optimizer, Path file, boolean reload)
            throws IOException {
        SavedOptimizerState state = SavedOptimizerState.read(file);
        Optimizer inner = optimizer.getInner();
        FusedOptimizerKind kind = requireKind(inner);
        FusedUpdate fused = optimizer.fusedUpdate();
        int buffers = fused != null ? fused.bufferCount() : kind.stateFields(inner).size();
        if (state.optimizer != kind.stateFileCode() || state.buffersPerParameter != buffers) {
            throw new AmpException(
                    "The optimizer state in "
                            + file
                            + " is "
                            + describe(state.optimizer, state.buffersPerParameter)
                            + "'s, but the trainer's optimizer is "
                            + kind.describe(buffers)
                            + ": load it into the optimizer it was saved from");
        }
        Map<String, Parameter> byName = new HashMap<>();
        for (Pair<String, Parameter> pair : session.getBlock().getParameters()) {
            byName.put(pair.getKey(), pair.getValue());
        }
        Set<String> unknown = new LinkedHashSet<>();
        for (String name : state.counts.keySet()) {
            if (!byName.containsKey(name)) {
                unknown.add(name);
            }
        }
        for (Map.Entry<String, float[][]> entry : state.buffers.entrySet()) {
            Parameter parameter = byName.get(entry.getKey());
            if (parameter == null) {
                unknown.add(entry.getKey());
            } else if (!parameter.isInitialized()
                    || !parameter.getArray().getShape().equals(state.shapes.get(entry.getKey()))) {
                throw new AmpException(
                        "The optimizer state of parameter '"
                                + entry.getKey()
                                + "' in "
                                + file
                                + " has shape "
                                + state.shapes.get(entry.getKey())
                                + ", the model's parameter "
                                + (parameter.isInitialized()
                                        ? "has " + parameter.getArray().getShape()
                                        : "is not initialized")
                                + ": load the state after trainer.initialize, into the model it"
                                + " was saved from");
            }
        }
        if (!unknown.isEmpty()) {
            throw new AmpException(
                    "The optimizer state in "
                            + file
                            + " names parameters this model does not have: "
                            + unknown
                            + "; load it into the model it was saved from");
        }
        List<String> missing = new ArrayList<>();
        for (Map.Entry<String, Parameter> entry : byName.entrySet()) {
            if (entry.getValue().requiresGradient() && !state.counts.containsKey(entry.getKey())) {
                missing.add(entry.getKey());
            }
        }
        if (!missing.isEmpty() && !state.counts.isEmpty()) {
            Collections.sort(missing);
            throw new AmpException(
                    "The optimizer state in "
                            + file
                            + " has no state for parameters this model trains: "
                            + missing
                            + "; load it into the model it was saved from, with the same layers"
                            + " trained (freeze the others before loading)");
        }
        if (fused != null) {
            if (reload) {
                fused.counter().forget();
            } else if (fused.counter().count() != null) {
                throw notBeforeFirstStep();
            }
            float rescale = momentumRescale(state, fused.momentumToDjl());
            Device device = null;
            NDManager owner = null;
            for (Map.Entry<String, float[][]> entry : state.buffers.entrySet()) {
                NDArray weight = byName.get(entry.getKey()).getArray();
                device = weight.getDevice();
                owner = weight.getManager();
                NDArray[] arrays = new NDArray[entry.getValue().length];
                for (int b = 0; b < arrays.length; b++) {
                    float[] values = entry.getValue()[b];
                    if (b == 0 && rescale != 1f) {
                        values = scaled(values, rescale);
                    }
                    arrays[b] = onDevice(owner, device, values, weight.getShape());
                }
                fused.putBuffers(byName.get(entry.getKey()).getId(), arrays);
            }
            Map<String, Long> applied = new LinkedHashMap<>();
            int begin = (int) DjlOptimizers.read(inner, Optimizer.class, "beginNumUpdate");
            state.counts.forEach(
                    (name, count) ->
                            applied.put(byName.get(name).getId(), Math.max(0, count - begin)));
            if (owner == null) {
                NDArray any = anyWeight(byName);
                owner = any.getManager();
                device = any.getDevice();
            }
            fused.counter().restore(applied, state.numUpdate, owner, device);
        } else {
            if (!reload && (int) DjlOptimizers.read(inner, Optimizer.class, "numUpdate") != 0) {
                throw notBeforeFirstStep();
            }
            List<Map<String, Map<Device, NDArray>>> maps = djlBuffers(kind, inner);
            float rescale = momentumRescale(state, 1f);
            for (Map.Entry<String, float[][]> entry : state.buffers.entrySet()) {
                NDArray weight = byName.get(entry.getKey()).getArray();
                for (int b = 0; b < maps.size(); b++) {
                    float[] values = entry.getValue()[b];
                    if (b == 0 && rescale != 1f) {
                        values = scaled(values, rescale);
                    }
                    NDArray array =
                            onDevice(
                                    weight.getManager(),
                                    weight.getDevice(),
                                    values,
                                    weight.getShape());
                    array.detach(); // as DJL's optimizers keep their state
                    Map<Device, NDArray> perDevice = new ConcurrentHashMap<>();
                    perDevice.put(weight.getDevice(), array);
                    Map<Device, NDArray> replaced =
                            maps.get(b).put(byName.get(entry.getKey()).getId(), perDevice);
                    if (replaced != null) {
                        replaced.values().forEach(NDArray::close); // a reload's first state
                    }
                }
            }
            Map<String, Integer> counts = djlCounts(inner);
            state.counts.forEach(
                    (name, count) -> counts.put(byName.get(name).getId(), (int) (long) count));
            DjlOptimizers.write(inner, Optimizer.class, "numUpdate", (int) state.numUpdate);
        }
    }

    /** The factor from the saved first buffer to the loading path's; 1 when both are DJL's. */
    private static float momentumRescale(SavedOptimizerState state, float loadingToDjl) {
        if (state.momentumToDjl == loadingToDjl || loadingToDjl == 0f) {
            return 1f;
        }
        return state.momentumToDjl / loadingToDjl;
    }

    private static AmpException notBeforeFirstStep() {
        return new AmpException(
                "The optimizer state can only be loaded before the trainer's first step: load it"
                        + " right after trainer.initialize(...)");
    }

    private static NDArray anyWeight(Map<String, Parameter> byName) {
        for (Parameter parameter : byName.values()) {
            if (parameter.isInitialized()) {
                return parameter.getArray();
            }
        }
        throw new AmpException(
                "The model has no initialized parameter: call trainer.initialize(...) before"
                        + " loading the optimizer state");
    }

    private static NDArray onDevice(NDManager owner, Device device, float[] values, Shape shape) {
        try (NDManager onDevice = owner.newSubManager(device)) {
            NDArray array = onDevice.create(values, shape);
            array.attach(owner);
            return array;
        }
    }

    private static float[] scaled(float[] values, float factor) {
        float[] result = new float[values.length];
        for (int i = 0; i < values.length; i++) {
            result[i] = values[i] * factor;
        }
        return result;
    }

    private static void put(
            SavedOptimizerState state, String name, NDArray[] buffers, AmpBackend backend) {
        float[][] values = new float[buffers.length][];
        for (int b = 0; b < buffers.length; b++) {
            values[b] = backend.readFloats(buffers[b]);
        }
        state.buffers.put(name, values);
        state.shapes.put(name, buffers[0].getShape());
    }

    /** Parameter id to name, for every parameter of the wrapped block. */
    private static Map<String, String> names(AmpSession session) {
        Map<String, String> names = new LinkedHashMap<>();
        for (Pair<String, Parameter> pair : session.getBlock().getParameters()) {
            names.putIfAbsent(pair.getValue().getId(), pair.getKey()); // a shared one: its first
        }
        return names;
    }

    private static FusedOptimizerKind requireKind(Optimizer optimizer) {
        return FusedOptimizerKinds.require(optimizer, "saves and loads the state");
    }

    private static String describe(int code, int buffers) {
        FusedOptimizerKind kind = FusedOptimizerKinds.ofStateFileCode(code);
        return kind == null ? "an unknown optimizer (" + code + ")" : kind.describe(buffers);
    }

    /** DJL's per-parameter state maps of the optimizer, in the order of its kind's buffers. */
    @SuppressWarnings("unchecked")
    private static List<Map<String, Map<Device, NDArray>>> djlBuffers(
            FusedOptimizerKind kind, Optimizer inner) {
        List<Map<String, Map<Device, NDArray>>> maps = new ArrayList<>();
        for (String field : kind.stateFields(inner)) {
            maps.add(
                    (Map<String, Map<Device, NDArray>>)
                            DjlOptimizers.read(inner, kind.optimizerClass(), field));
        }
        return maps;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Integer> djlCounts(Optimizer inner) {
        return (Map<String, Integer>) DjlOptimizers.read(inner, Optimizer.class, "updateCounts");
    }
}
