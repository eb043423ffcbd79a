package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.exception.AmpException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An optimizer's state as {@link OptimizerStateFile} saves it, by parameter name, and its encoding:
 * DJL's {@link NDList} format, one array per buffer ({@code name#0}, {@code name#1}), one per
 * parameter count ({@code name#count}), the update count ({@code #numUpdate}), the first buffer's
 * factor to DJL's ({@code #momentumToDjl}) and the header ({@code #kind}: format, the optimizer's
 * {@link FusedOptimizerKind#stateFileCode()}, buffers per parameter). Knows no optimizer.
 */
final class SavedOptimizerState {

    private static final int FORMAT = 1;
    private static final String KIND = "#kind";
    private static final String NUM_UPDATE = "#numUpdate";
    private static final String MOMENTUM_TO_DJL = "#momentumToDjl";
    private static final String COUNT = "#count";

    /** The optimizer's {@link FusedOptimizerKind#stateFileCode()}. */
    int optimizer;

    int buffersPerParameter;

    /** DJL's update count of the optimizer. */
    long numUpdate;

    /** What the saved first buffer is multiplied by to be DJL's (a fixed-rate fused SGD's rate). */
    float momentumToDjl = 1f;

    /** DJL's update count of each parameter, by name. */
    final Map<String, Long> counts = new LinkedHashMap<>();

    /** Each parameter's buffers, by name, in its optimizer kind's order. */
    final Map<String, float[][]> buffers = new LinkedHashMap<>();

    final Map<String, Shape> shapes = new HashMap<>();

    /**
     * Writes the state to a file, atomically: the file is replaced whole or not at all.
     *
     * @param file the file
     * @throws IOException when it cannot be written
     */
    void write(Path file) throws IOException {
        try (NDManager cpu = NDManager.newBaseManager(Device.cpu())) {
            NDList list = new NDList();
            list.add(named(cpu.create(new int[] {FORMAT, optimizer, buffersPerParameter}), KIND));
            list.add(named(cpu.create(new long[] {numUpdate}), NUM_UPDATE));
            list.add(named(cpu.create(new float[] {momentumToDjl}), MOMENTUM_TO_DJL));
            counts.forEach(
                    (name, count) -> list.add(named(cpu.create(new long[] {count}), name + COUNT)));
            buffers.forEach(
                    (name, values) -> {
                        for (int b = 0; b < values.length; b++) {
                            list.add(
                                    named(cpu.create(values[b], shapes.get(name)), name + "#" + b));
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

    /**
     * Reads a state written by {@link #write(Path)}.
     *
     * @param file the file
     * @return the state
     * @throws IOException when it cannot be read
     */
    static SavedOptimizerState read(Path file) throws IOException {
        if (!Files.isRegularFile(file)) {
            throw new AmpException(
                    "No optimizer state at "
                            + file
                            + ": save one with AmpSession.saveOptimizerState first");
        }
        SavedOptimizerState state = new SavedOptimizerState();
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
