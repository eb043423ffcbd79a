package io.github.djlamp.amp.verify;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import io.github.djlamp.amp.spi.DeviceScaleState;
import io.github.djlamp.amp.spi.DynamicScaleSettings;
import io.github.djlamp.amp.spi.FusedOptimizerStep;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.List;
import java.util.function.Function;
import java.util.function.Supplier;

/** A test double of the engine layer that does what the real one does: broken ones extend it. */
abstract class ForwardingBackend implements AmpBackend {

    final AmpBackend real;

    ForwardingBackend(AmpBackend real) {
        this.real = real;
    }

    @Override
    public NDArray cast(NDArray array, Precision target, MemoryLayout layout, NDManager manager) {
        return real.cast(array, target, layout, manager);
    }

    @Override
    public String getEngineName() {
        return real.getEngineName();
    }

    @Override
    public Precision precisionOf(NDArray array) {
        return real.precisionOf(array);
    }

    @Override
    public void unscaleAndCheck(NDList gradients, NDArray foundInf, NDArray invScale) {
        real.unscaleAndCheck(gradients, foundInf, invScale);
    }

    @Override
    public float readFloat(NDArray array) {
        return real.readFloat(array);
    }

    @Override
    public float[] readFloats(NDArray array) {
        return real.readFloats(array);
    }

    @Override
    public void fusedStep(FusedOptimizerStep step) {
        real.fusedStep(step);
    }

    @Override
    public void copy(NDList destinations, NDList sources) {
        real.copy(destinations, sources);
    }

    @Override
    public void restoreWhere(NDList live, NDList saved, NDArray foundInf) {
        real.restoreWhere(live, saved, foundInf);
    }

    @Override
    public void zero(NDList arrays) {
        real.zero(arrays);
    }

    @Override
    public void updateScale(
            NDArray scale,
            NDArray growthTracker,
            NDArray foundInf,
            double growthFactor,
            double backoffFactor,
            int growthInterval) {
        real.updateScale(
                scale, growthTracker, foundInf, growthFactor, backoffFactor, growthInterval);
    }

    @Override
    public void updateScaleWithHysteresis(
            DeviceScaleState state, NDArray foundInf, DynamicScaleSettings settings) {
        real.updateScaleWithHysteresis(state, foundInf, settings);
    }

    @Override
    public NDList valueAndGradients(
            Function<NDList, NDArray> function,
            NDList inputs,
            NDArray cotangent,
            NDManager resultManager) {
        return real.valueAndGradients(function, inputs, cotangent, resultManager);
    }

    @Override
    public DeviceCapabilities capabilities(Device device) {
        return real.capabilities(device);
    }

    @Override
    public void requireDjlSafe(NDArray array, String operation) {
        real.requireDjlSafe(array, operation);
    }

    @Override
    public boolean setRecording(boolean recording) {
        return real.setRecording(recording);
    }

    @Override
    public boolean isRecording() {
        return real.isRecording();
    }

    @Override
    public boolean requiresGradient(NDArray array) {
        return real.requiresGradient(array);
    }

    @Override
    public NDArray detachedLeaf(NDArray array, NDManager manager) {
        return real.detachedLeaf(array, manager);
    }

    @Override
    public List<NDArray> backwardTo(
            NDList outputs, NDList gradients, NDList inputs, NDList parameters, NDManager manager) {
        return real.backwardTo(outputs, gradients, inputs, parameters, manager);
    }

    @Override
    public Block recordingForCheck(Block block) {
        return real.recordingForCheck(block);
    }

    @Override
    public boolean computesWithOwnParameters(Block block) {
        return real.computesWithOwnParameters(block);
    }

    @Override
    public <T> T withEngineAutocast(Device device, Precision precision, Supplier<T> forward) {
        return real.withEngineAutocast(device, precision, forward);
    }
}
