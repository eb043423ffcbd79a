package io.github.djlamp.amp.cast.internal;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The values the forward pass itself changes (BatchNorm's running mean and variance), copied at the
 * first training forward of a step so that a skipped step can put them back: an overflowing batch
 * must not leave Inf or NaN in the running statistics any more than in the weights.
 *
 * <p>The copies are kept from step to step (one per statistic and device, made at the first step of
 * a trainer) and refilled by one multi-array copy: a step costs two calls into the engine, not an
 * allocation and a copy per statistic (ResNet-50 has 106 of them).
 */
public final class BufferSnapshot {

    private final NDList live = new NDList();
    private final NDList saved = new NDList();
    private final Set<String> taken = new HashSet<>();
    private final Map<String, NDArray> copies = new HashMap<>();
    private List<Parameter> runningStatistics;
    private boolean treeChanged;
    private ParameterStore owner;
    private NDManager copiesManager;

    /** Creates an empty snapshot. */
    public BufferSnapshot() {}

    /**
     * Copies the running statistics of {@code block} on {@code device}, unless this step already
     * has them.
     *
     * @param store the trainer's parameter store
     * @param block the block whose buffers to copy
     * @param device the device of this forward pass
     * @param backend the engine layer that copies
     */
    synchronized void take(ParameterStore store, Block block, Device device, AmpBackend backend) {
        if (live.isEmpty() && (store != owner || treeChanged)) {
            // between steps: the copies belong to one trainer's store and one tree
            releaseCopies();
            owner = store;
            treeChanged = false;
        }
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
        NDList sources = new NDList();
        NDList targets = new NDList();
        for (Parameter parameter : runningStatistics) {
            String key = parameter.getId() + "@" + device;
            if (!parameter.isInitialized() || !taken.add(key)) {
                continue;
            }
            NDArray value = store.getValue(parameter, device, true);
            NDArray copy = copies.get(key);
            if (copy == null
                    || !copy.getShape().equals(value.getShape())
                    || copy.getDataType() != value.getDataType()) {
                if (copiesManager == null) {
                    // owned here, not by the batch: kept across steps, freed with the trainer
                    copiesManager = store.getManager().newSubManager();
                }
                if (copy != null) {
                    copy.close();
                }
                copy = value.duplicate();
                copy.attach(copiesManager);
                copies.put(key, copy);
            } else {
                sources.add(value);
                targets.add(copy);
            }
            live.add(value);
            saved.add(copy);
        }
        backend.copy(targets, sources);
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
        backend.restoreWhere(live, saved, foundInf);
    }

    /** Forgets the running statistics found in the tree: the user has changed the tree. */
    synchronized void forgetTree() {
        runningStatistics = null;
        treeChanged = true;
    }

    /** Ends the step; the copies stay for the next one. */
    public synchronized void clear() {
        live.clear();
        saved.clear();
        taken.clear();
    }

    private void releaseCopies() {
        copies.clear();
        if (copiesManager != null) {
            copiesManager.close(); // also when the trainer's manager closed it already
            copiesManager = null;
        }
    }
}
