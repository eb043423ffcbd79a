package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.optimizer.Sgd;
import ai.djl.util.Pair;
import io.github.djlamp.amp.AmpException;
import io.github.djlamp.amp.spi.AmpBackend;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
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
 * The optimizer's state in a file: SGD's momentum or Adam's moments and DJL's update counts, keyed
 * by parameter name, so that a run resumes on either path (DJL's per-parameter update or the fused
 * step) from a file either wrote. Counts and moments mean what they mean to DJL's optimizers; the
 * momentum is kept as the saving path holds it (a fused SGD with a fixed rate keeps the rate out of
 * it), with the factor that makes it DJL's, so that the same path resumes bit for bit. DJL's
 * optimizers keep their state in private fields (DJL 0.35.1), read and written here by reflection.
 *
 * <p>The file is DJL's {@link NDList} encoding: one array per buffer ({@code name#0}, {@code
 * name#1}), one per parameter count ({@code name#count}), the update count ({@code #numUpdate}),
 * the momentum's factor ({@code #momentumToDjl}) and the kind ({@code #kind}: format, optimizer,
 * buffers per parameter).
 */
final class OptimizerStateFile {

    private static final int FORMAT = 1;
    private static final String KIND = "#kind";
    private static final String NUM_UPDATE = "#numUpdate";
    private static final String MOMENTUM_TO_DJL = "#momentumToDjl";
    private static final String COUNT = "#count";

    private OptimizerStateFile() {}

    /** What is saved, by parameter name. */
    private static final class State {
        int optimizer;
        int buffersPerParameter;
        long numUpdate;

        /** What the saved momentum is multiplied by to be DJL's (a fixed-rate fused SGD's rate). */
        float momentumToDjl = 1f;

        final Map<String, Long> counts = new LinkedHashMap<>();
        final Map<String, float[][]> buffers = new LinkedHashMap<>();
        final Map<String, Shape> shapes = new HashMap<>();
    }

    static void save(AmpSession session, LossScalingOptimizer optimizer, Path file)
            throws IOException {
        State state = new State();
        Optimizer inner = optimizer.getInner();
        state.optimizer = kindOf(inner).code;
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
            state.buffersPerParameter = djlBufferCount(inner);
            List<Map<String, Map<Device, NDArray>>> maps = djlBuffers(inner);
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
        write(state, file);
    }

    static void load(AmpSession session, LossScalingOptimizer optimizer, Path file)
            throws IOException {
        State state = read(file);
        Optimizer inner = optimizer.getInner();
        DjlOptimizers.Kind kind = kindOf(inner);
        FusedUpdate fused = optimizer.fusedUpdate();
        int buffers = fused != null ? fused.bufferCount() : djlBufferCount(inner);
        if (state.optimizer != kind.code || state.buffersPerParameter != buffers) {
            throw new AmpException(
                    "The optimizer state in "
                            + file
                            + " is "
                            + describe(state.optimizer, state.buffersPerParameter)
                            + "'s, but the trainer's optimizer is "
                            + describe(kind.code, buffers)
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
        boolean reload = session.isOptimizerStateUntouchedSinceLoad();
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
            session.markOptimizerStateLoaded();
        } else {
            if (!reload && (int) DjlOptimizers.read(inner, Optimizer.class, "numUpdate") != 0) {
                throw notBeforeFirstStep();
            }
            List<Map<String, Map<Device, NDArray>>> maps = djlBuffers(inner);
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
            session.markOptimizerStateLoaded();
        }
    }

    /** The factor from the saved momentum to the loading path's, 1 for Adam's moments. */
    private static float momentumRescale(State state, float loadingToDjl) {
        if (state.optimizer != 1 || state.momentumToDjl == loadingToDjl || loadingToDjl == 0f) {
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

    private static void put(State state, String name, NDArray[] buffers, AmpBackend backend) {
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
            names.put(pair.getValue().getId(), pair.getKey());
        }
        return names;
    }

    private static DjlOptimizers.Kind kindOf(Optimizer optimizer) {
        DjlOptimizers.Kind kind = DjlOptimizers.kindOf(optimizer);
        if (kind == null) {
            throw new AmpException(
                    "djl-amp saves and loads the state of DJL's Sgd, Adam and AdamW, not of "
                            + optimizer.getClass().getName());
        }
        return kind;
    }

    private static String describe(int code, int buffers) {
        DjlOptimizers.Kind kind = DjlOptimizers.Kind.ofCode(code);
        if (kind == null) {
            return "an unknown optimizer (" + code + ")";
        }
        switch (kind) {
            case SGD:
                return buffers == 0 ? "Sgd without momentum" : "Sgd with momentum";
            case ADAM:
                return "Adam";
            default:
                return "AdamW";
        }
    }

    private static int djlBufferCount(Optimizer inner) {
        float momentum =
                inner instanceof Sgd
                        ? (float) DjlOptimizers.read(inner, Sgd.class, "momentum")
                        : 0f;
        return kindOf(inner).bufferCount(momentum);
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Map<Device, NDArray>>> djlBuffers(Optimizer inner) {
        List<Map<String, Map<Device, NDArray>>> maps = new ArrayList<>();
        if (inner instanceof Sgd) {
            if (djlBufferCount(inner) == 1) {
                maps.add(
                        (Map<String, Map<Device, NDArray>>)
                                DjlOptimizers.read(inner, Sgd.class, "momentumStates"));
            }
        } else {
            Class<?> type = inner.getClass();
            maps.add((Map<String, Map<Device, NDArray>>) DjlOptimizers.read(inner, type, "means"));
            maps.add(
                    (Map<String, Map<Device, NDArray>>)
                            DjlOptimizers.read(inner, type, "variances"));
        }
        return maps;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Integer> djlCounts(Optimizer inner) {
        return (Map<String, Integer>) DjlOptimizers.read(inner, Optimizer.class, "updateCounts");
    }

    private static void write(State state, Path file) throws IOException {
        try (NDManager cpu = NDManager.newBaseManager(Device.cpu())) {
            NDList list = new NDList();
            list.add(
                    named(
                            cpu.create(
                                    new int[] {FORMAT, state.optimizer, state.buffersPerParameter}),
                            KIND));
            list.add(named(cpu.create(new long[] {state.numUpdate}), NUM_UPDATE));
            list.add(named(cpu.create(new float[] {state.momentumToDjl}), MOMENTUM_TO_DJL));
            state.counts.forEach(
                    (name, count) -> list.add(named(cpu.create(new long[] {count}), name + COUNT)));
            state.buffers.forEach(
                    (name, values) -> {
                        for (int b = 0; b < values.length; b++) {
                            list.add(
                                    named(
                                            cpu.create(values[b], state.shapes.get(name)),
                                            name + "#" + b));
                        }
                    });
            if (Files.isDirectory(file)) {
                throw new AmpException(
                        "Cannot save the optimizer state to "
                                + file
                                + ": it is a directory; give a file path, for example "
                                + file.resolve("model.optimizer"));
            }
            Path parent = file.toAbsolutePath().getParent();
            if (parent != null) {
                Files.createDirectories(parent);
            }
            // a name of its own: two trainers saving to one path at once do not share a file
            Path partial =
                    Files.createTempFile(
                            file.toAbsolutePath().getParent(),
                            file.getFileName() + ".",
                            ".partial");
            try {
                try (OutputStream out = Files.newOutputStream(partial)) {
                    list.encode(out);
                }
                Files.move(
                        partial,
                        file,
                        StandardCopyOption.REPLACE_EXISTING,
                        StandardCopyOption.ATOMIC_MOVE);
            } finally {
                Files.deleteIfExists(partial);
            }
        }
    }

    private static NDArray named(NDArray array, String name) {
        array.setName(name);
        return array;
    }

    private static State read(Path file) throws IOException {
        if (!Files.isRegularFile(file)) {
            throw new AmpException(
                    "No optimizer state at "
                            + file
                            + ": save one with AmpSession.saveOptimizerState first");
        }
        State state = new State();
        try (NDManager cpu = NDManager.newBaseManager(Device.cpu());
                InputStream in = Files.newInputStream(file)) {
            NDList list;
            try {
                list = NDList.decode(cpu, in);
            } catch (RuntimeException e) {
                throw new AmpException(
                        file + " is not an optimizer state saved by djl-amp: " + e.getMessage(), e);
            }
            NDArray kind = list.get(KIND);
            if (kind == null || kind.getDataType() != DataType.INT32 || kind.size() != 3) {
                throw new AmpException(
                        file + " is not an optimizer state saved by djl-amp (no " + KIND + ")");
            }
            int[] header = kind.toIntArray();
            if (header[0] != FORMAT) {
                throw new AmpException(
                        file
                                + " has optimizer state format "
                                + header[0]
                                + "; this djl-amp reads format "
                                + FORMAT);
            }
            state.optimizer = header[1];
            state.buffersPerParameter = header[2];
            state.numUpdate = list.get(NUM_UPDATE).toLongArray()[0];
            state.momentumToDjl = list.get(MOMENTUM_TO_DJL).toFloatArray()[0];
            Map<String, float[][]> buffers = state.buffers;
            for (NDArray array : list) {
                String name = array.getName();
                if (name == null || name.startsWith("#")) {
                    continue;
                }
                if (name.endsWith(COUNT)) {
                    state.counts.put(
                            name.substring(0, name.length() - COUNT.length()),
                            array.toLongArray()[0]);
                    continue;
                }
                int hash = name.lastIndexOf('#');
                String parameter = name.substring(0, hash);
                int b = Integer.parseInt(name.substring(hash + 1));
                buffers.computeIfAbsent(parameter, k -> new float[state.buffersPerParameter][])[b] =
                        array.toFloatArray();
                state.shapes.put(parameter, array.getShape());
            }
        }
        return state;
    }
}
