package io.github.djlamp.amp.spi;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import io.github.djlamp.amp.exception.AmpException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One fused optimizer step over every parameter, as {@link AmpBackend#fusedStep} runs it: the
 * kernel, named after the DJL optimizer whose update it reproduces ({@code "sgd"}, {@code "adam"},
 * ...), with that optimizer's own settings by name; the parameters with their gradients and state
 * buffers; and what every fused step shares: the weight decay, the learning rate, DJL's gradient
 * adjustment, DJL's update count and the overflow flag that skips the step on the device.
 *
 * <p>The state is one list per buffer kind (for example Adam's first moments, then its second
 * moments), each with one array per weight in the weights' order. The step only refers to arrays
 * its caller owns.
 */
public final class FusedOptimizerStep {

    private final String kernel;
    private final Map<String, Float> settings;
    private final NDList weights;
    private final NDList gradients;
    private final List<NDList> state;
    private final float weightDecay;
    private final LearningRate learningRate;
    private final GradientAdjustment adjustment;
    private final UpdateCounter counter;
    private final NDArray foundInf;

    private FusedOptimizerStep(Builder builder) {
        kernel = builder.kernel;
        settings = Collections.unmodifiableMap(new LinkedHashMap<>(builder.settings));
        weights = builder.weights;
        gradients = builder.gradients;
        state = List.copyOf(builder.state);
        weightDecay = builder.weightDecay;
        learningRate = builder.learningRate;
        adjustment = builder.adjustment;
        counter = builder.counter;
        foundInf = builder.foundInf;
    }

    /**
     * Starts a step of a kernel.
     *
     * @param kernel the kernel's name: the DJL optimizer it reproduces, in lower case
     * @return the builder
     */
    public static Builder builder(String kernel) {
        return new Builder(kernel);
    }

    /**
     * Returns the kernel's name.
     *
     * @return the DJL optimizer the kernel reproduces, in lower case, e.g. {@code "adamw"}
     */
    public String getKernel() {
        return kernel;
    }

    /**
     * Returns the kernel's own settings, in the order they were given.
     *
     * @return the settings by name, e.g. {@code momentum}; unmodifiable
     */
    public Map<String, Float> getSettings() {
        return settings;
    }

    /**
     * Returns the parameters, updated in place.
     *
     * @return the weights
     */
    public NDList getWeights() {
        return weights;
    }

    /**
     * Returns the weights' gradients, zeroed by the step, skipped or not.
     *
     * @return one gradient per weight
     */
    public NDList getGradients() {
        return gradients;
    }

    /**
     * Returns the optimizer's state, updated in place when the step is not skipped.
     *
     * @return one list per buffer kind, each with one array per weight; empty for none
     */
    public List<NDList> getState() {
        return state;
    }

    /**
     * Returns the weight decay, which each kernel applies as its DJL optimizer does.
     *
     * @return DJL's weightDecays
     */
    public float getWeightDecay() {
        return weightDecay;
    }

    /**
     * Returns the learning rate.
     *
     * @return the rate, constant or per update count
     */
    public LearningRate getLearningRate() {
        return learningRate;
    }

    /**
     * Returns what is done to every gradient first.
     *
     * @return DJL's rescaleGrad and clipGrad
     */
    public GradientAdjustment getAdjustment() {
        return adjustment;
    }

    /**
     * Returns DJL's update count, which the step advances on the device unless it is skipped.
     *
     * @return the counter
     */
    public UpdateCounter getCounter() {
        return counter;
    }

    /**
     * Returns the overflow flag.
     *
     * @return a one-element FP32 array, non-zero to skip the step
     */
    public NDArray getFoundInf() {
        return foundInf;
    }

    /** Builds a {@link FusedOptimizerStep}; every setting but the kernel's name is named. */
    public static final class Builder {

        private final String kernel;
        private final Map<String, Float> settings = new LinkedHashMap<>();
        private NDList weights;
        private NDList gradients;
        private final List<NDList> state = new ArrayList<>();
        private float weightDecay;
        private LearningRate learningRate;
        private GradientAdjustment adjustment = GradientAdjustment.NONE;
        private UpdateCounter counter;
        private NDArray foundInf;

        private Builder(String kernel) {
            if (kernel == null || kernel.isEmpty()) {
                throw new AmpException(
                        "A fused step needs the name of its kernel, the DJL optimizer it"
                                + " reproduces (for example \"adam\"), got "
                                + (kernel == null ? "null" : "an empty name"));
            }
            this.kernel = kernel;
        }

        /**
         * Sets one of the kernel's own settings.
         *
         * @param name the setting's name, as the kernel reads it (e.g. {@code momentum})
         * @param value its value
         * @return this builder
         */
        public Builder setting(String name, float value) {
            settings.put(name, value);
            return this;
        }

        /**
         * Sets the kernel's own settings, adding to any set before.
         *
         * @param values the settings by name
         * @return this builder
         */
        public Builder settings(Map<String, Float> values) {
            settings.putAll(values);
            return this;
        }

        /**
         * Sets the parameters and their gradients.
         *
         * @param weights the parameters, updated in place
         * @param gradients one gradient per weight, zeroed by the step
         * @return this builder
         */
        public Builder parameters(NDList weights, NDList gradients) {
            this.weights = weights;
            this.gradients = gradients;
            return this;
        }

        /**
         * Adds one buffer kind of the optimizer's state, after those added before.
         *
         * @param buffers one zero-initialised or carried-over array per weight
         * @return this builder
         */
        public Builder state(NDList buffers) {
            state.add(buffers);
            return this;
        }

        /**
         * Sets the weight decay (0 by default).
         *
         * @param value DJL's weightDecays
         * @return this builder
         */
        public Builder weightDecay(float value) {
            weightDecay = value;
            return this;
        }

        /**
         * Sets the learning rate.
         *
         * @param rate the rate, constant or per update count
         * @return this builder
         */
        public Builder learningRate(LearningRate rate) {
            learningRate = rate;
            return this;
        }

        /**
         * Sets what is done to every gradient first ({@link GradientAdjustment#NONE} by default).
         *
         * @param value DJL's rescaleGrad and clipGrad
         * @return this builder
         */
        public Builder adjustment(GradientAdjustment value) {
            adjustment = value;
            return this;
        }

        /**
         * Sets DJL's update count.
         *
         * @param value the counter, which picks a scheduled rate and Adam's bias corrections
         * @return this builder
         */
        public Builder counter(UpdateCounter value) {
            counter = value;
            return this;
        }

        /**
         * Sets the overflow flag.
         *
         * @param value a one-element FP32 array, non-zero to skip the step
         * @return this builder
         */
        public Builder foundInf(NDArray value) {
            foundInf = value;
            return this;
        }

        /**
         * Builds the step.
         *
         * @return the step
         * @throws AmpException naming what is missing, or the list that has not one array per
         *     weight
         */
        public FusedOptimizerStep build() {
            require(weights != null && gradients != null, "parameters(weights, gradients)");
            require(learningRate != null, "learningRate(...)");
            require(adjustment != null, "adjustment(...)");
            require(counter != null, "counter(...)");
            require(foundInf != null, "foundInf(...)");
            requireOnePerWeight(gradients, "gradients");
            for (int i = 0; i < state.size(); i++) {
                requireOnePerWeight(state.get(i), "state buffers " + i);
            }
            return new FusedOptimizerStep(this);
        }

        private void require(boolean given, String call) {
            if (!given) {
                throw new AmpException(
                        "The fused " + kernel + " step is missing its " + call + ": set it first");
            }
        }

        private void requireOnePerWeight(NDList arrays, String what) {
            if (arrays == null || arrays.size() != weights.size()) {
                throw new AmpException(
                        "A fused step needs one of the "
                                + what
                                + " per weight: got "
                                + (arrays == null ? "none" : arrays.size())
                                + " for "
                                + weights.size()
                                + " weights");
            }
        }
    }
}
