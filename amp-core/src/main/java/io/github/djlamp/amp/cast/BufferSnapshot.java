package io.github.djlamp.amp.cast;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The values the forward pass itself changes (BatchNorm's running mean and variance), copied at the
 * first training forward of a step so that a skipped step can put them back: an overflowing batch
 * must not leave Inf or NaN in the running statistics any more than in the weights.
 */
public final class BufferSnapshot {

    private final NDList live = new NDList();
    private final NDList saved = new NDList();
    private final Set<String> taken = new HashSet<>();
    private List<Parameter> runningStatistics;
    private NDManager copies;

    /** Creates an empty snapshot. */
    public BufferSnapshot() {}

    /**
     * Copies the running statistics of {@code block} on {@code device}, unless this step already
     * has them.
     *
     * @param store the trainer's parameter store
     * @param block the block whose buffers to copy
     * @param device the device of this forward pass
     */
    synchronized void take(ParameterStore store, Block block, Device device) {
        if (runningStatistics == null) {
            // found once, not every step; forgetTree() when the tree changes
            runningStatistics = new ArrayList<>();
            for (Pair<String, Parameter> pair : block.getParameters()) {
                Parameter.Type type = pair.getValue().getType();
                if (type == Parameter.Type.RUNNING_MEAN || type == Parameter.Type.RUNNING_VAR) {
                    runningStatistics.add(pair.getValue());
                }
            }
        }
        for (Parameter parameter : runningStatistics) {
            if (!parameter.isInitialized() || !taken.add(parameter.getId() + "@" + device)) {
                continue;
            }
            NDArray value = store.getValue(parameter, device, true);
            if (copies == null) {
                // owned here, not by the batch: an accumulation window spans several batches
                copies = store.getManager().newSubManager();
            }
            NDArray copy = value.duplicate();
            copy.attach(copies);
            live.add(value);
            saved.add(copy);
        }
    }

    /**
     * Puts the copied values back.
     *
     * @param backend the engine layer that copies in place
     */
    public synchronized void restore(AmpBackend backend) {
        backend.copy(live, saved);
    }

    /**
     * Puts the copied values back where {@code foundInf} is non-zero, decided on the device: {@code
     * live = where(foundInf != 0, saved, live)}, with no host read.
     *
     * @param backend the engine layer that copies in place
     * @param foundInf the step's overflow flag, a one-element array on the buffers' device
     */
    public synchronized void restoreIf(AmpBackend backend, NDArray foundInf) {
        if (live.isEmpty()) {
            return;
        }
        try (NDManager scratch = foundInf.getManager().newSubManager()) {
            NDArray found = foundInf.neq(0f);
            found.attach(scratch);
            NDArray skip = found.reshape(new Shape());
            skip.attach(scratch);
            NDList chosen = new NDList(live.size());
            for (int i = 0; i < live.size(); i++) {
                // DJL's where does not broadcast the condition
                NDArray condition = skip.broadcast(live.get(i).getShape());
                condition.attach(scratch);
                NDArray value = NDArrays.where(condition, saved.get(i), live.get(i));
                value.attach(scratch);
                chosen.add(value);
            }
            backend.copy(live, chosen);
        }
    }

    /** Forgets the running statistics found in the tree: the user has changed the tree. */
    synchronized void forgetTree() {
        runningStatistics = null;
    }

    /** Frees this step's copies. */
    public synchronized void clear() {
        live.clear();
        saved.clear();
        taken.clear();
        if (copies != null) {
            copies.close();
            copies = null;
        }
    }
}
