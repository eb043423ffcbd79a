package io.github.djlamp.amp.scale;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.spi.AmpBackend;

/**
 * Unscales every replica's gradients in place and checks them for Inf/NaN with one fused kernel
 * call per device, merging the devices' flags into one: a single overflow on any device skips the
 * step on all of them. Reads nothing on the host.
 */
final class GradientUnscaler {

    private GradientUnscaler() {}

    /**
     * Runs the check; {@code foundInf} must be zero before and is non-zero after when any gradient
     * held Inf or NaN.
     *
     * @param backend the kernels
     * @param gradients every device's gradients of the step
     * @param inverse 1/scale, a 0-dimensional FP32 array on {@code stepManager}
     * @param foundInf the merged flag, a 0-dimensional FP32 array on the scaler's device
     * @param stepManager the step's manager, for the per-device copies and flags
     */
    static void unscaleAndCheck(
            AmpBackend backend,
            GradientSet gradients,
            NDArray inverse,
            NDArray foundInf,
            NDManager stepManager) {
        boolean first = true;
        for (NDList group : gradients.byReplica().values()) {
            Device device = group.get(0).getDevice();
            NDArray inv = inverse.toDevice(device, false);
            inv.attach(stepManager);
            if (first && device.equals(foundInf.getDevice())) {
                backend.unscaleAndCheck(group, foundInf, inv);
            } else {
                // each further replica checks into its own flag on its device; flags merge here
                NDArray found = stepManager.zeros(new Shape(), DataType.FLOAT32, device);
                backend.unscaleAndCheck(group, found, inv);
                NDArray moved = found.toDevice(foundInf.getDevice(), false);
                moved.attach(stepManager);
                foundInf.addi(moved);
            }
            first = false;
        }
    }
}
