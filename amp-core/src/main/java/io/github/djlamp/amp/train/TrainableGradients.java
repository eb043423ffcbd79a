package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.scale.GradientSet;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The gradients a step checks and updates: every device's gradient of every trainable parameter
 * (requiresGradient) of the wrapped block, each parameter once however many places share it,
 * combined across processes by the data-parallel reducer when there is one. The trainable set is
 * kept between steps, since walking DJL's block tree for it costs about 0.1 ms a step on ResNet-50,
 * and listed again when a flag changed (a layer frozen or unfrozen mid-training) or the tree itself
 * changed (a head replaced after wrapping).
 */
final class TrainableGradients {

    private final MixedPrecisionBlock block;
    private List<Pair<String, Parameter>> parameters;
    private boolean[] trainableFlags;
    private int parametersTreeVersion;
    private List<Pair<String, Parameter>> trainable;
    private GradientReducer reducer;

    TrainableGradients(MixedPrecisionBlock block) {
        this.block = block;
    }

    /** The trainable parameters, by name, in the block's order. */
    List<Pair<String, Parameter>> trainableParameters() {
        refresh();
        return trainable;
    }

    /**
     * Every parameter, trained or not (BatchNorm's running statistics), each once, in the block's
     * order: kept as the trainable set is.
     */
    List<Pair<String, Parameter>> allParameters() {
        refresh();
        return parameters;
    }

    /** Whether a reducer combines the gradients of several processes before each check. */
    boolean hasReducer() {
        return reducer != null;
    }

    /** Sets what combines the gradients of several processes before each check, or null. */
    void setReducer(GradientReducer reducer) {
        this.reducer = reducer;
    }

    /**
     * The step's gradients for the unscale-and-check, combined across processes first when a
     * reducer is set; without scaling or reduction nothing needs them, so no handles are made.
     */
    GradientSet forCheck(Device[] devices, NDManager stepManager, boolean scaling) {
        if (!scaling && reducer == null) {
            return new GradientSet();
        }
        GradientSet gradients = collect(devices, stepManager);
        if (reducer != null) {
            reducer.reduce(gradients, stepManager);
        }
        return gradients;
    }

    /**
     * Collects every device's gradient of every initialized trainable parameter; the handles belong
     * to {@code stepManager}.
     */
    GradientSet collect(Device[] devices, NDManager stepManager) {
        GradientSet set = new GradientSet();
        ParameterStore store = block.getTrainingLink().getTrainingStore();
        for (Pair<String, Parameter> pair : trainableParameters()) {
            Parameter parameter = pair.getValue();
            if (!parameter.isInitialized()) {
                continue;
            }
            for (int replica = 0; replica < devices.length; replica++) {
                NDArray weight =
                        store != null
                                ? store.getValue(parameter, devices[replica], true)
                                : parameter.getArray();
                NDArray grad = weight.getGradient();
                grad.attach(stepManager);
                set.add(pair.getKey(), replica, grad);
                if (store == null) {
                    break;
                }
            }
        }
        return set;
    }

    /**
     * Zeroes every device's gradient of the trainable parameters (DJL zeroes them only inside its
     * optimizers' updates); nothing before the block's first training forward pass.
     */
    void clear(AmpBackend backend, Device[] devices, NDManager parent) {
        if (block.getTrainingLink().getTrainingStore() == null) {
            return;
        }
        try (NDManager scratch = parent.newSubManager()) {
            for (NDList group : collect(devices, scratch).byReplica().values()) {
                backend.zero(group);
            }
        }
    }

    private void refresh() {
        int treeVersion = block.getTrainingLink().getTreeVersion();
        if (parameters == null || parametersTreeVersion != treeVersion) {
            parametersTreeVersion = treeVersion;
            parameters = new ArrayList<>();
            Set<String> listed = new HashSet<>();
            for (Pair<String, Parameter> pair : block.getParameters()) {
                // a block used in several places (TabNet's shared layers, tied embeddings) lists
                // its parameters once per place: one parameter, one gradient, one update, as in
                // DJL's ParameterStore, under the name of its first place
                if (listed.add(pair.getValue().getId())) {
                    parameters.add(pair);
                }
            }
            trainableFlags = new boolean[parameters.size()];
            trainable = null;
        }
        boolean changed = trainable == null;
        for (int i = 0; i < trainableFlags.length; i++) {
            boolean flag = parameters.get(i).getValue().requiresGradient();
            if (flag != trainableFlags[i]) {
                trainableFlags[i] = flag;
                changed = true;
            }
        }
        if (changed) {
            trainable = new ArrayList<>();
            for (int i = 0; i < trainableFlags.length; i++) {
                if (trainableFlags[i]) {
                    trainable.add(parameters.get(i));
                }
            }
        }
    }
}
