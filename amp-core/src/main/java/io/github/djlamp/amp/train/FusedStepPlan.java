package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.spi.AmpBackend;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Decides, once per attached trainer, whether its optimizer steps are fused (one launch for every
 * parameter, skipped on the device) or DJL's own per-parameter update, and makes the loss scaler
 * that goes with that: fused steps read no verdict on the host, so the scaler keeps its state on
 * the device; DJL's update needs the verdict every step, so the scaler reads it on the host.
 */
final class FusedStepPlan {

    private static final Logger logger = LoggerFactory.getLogger(FusedStepPlan.class);

    private FusedStepPlan() {}

    /**
     * Whether the trainer's steps are fused: wanted by the settings on these devices (for an
     * optimizer DJL's engine cannot update, DJL's Nag, as the settings say for that case), on one
     * device, and the optimizer has a fused version (planned at its first call, logged otherwise).
     */
    static boolean fusesSteps(
            SessionSettings settings, Device[] devices, LossScalingOptimizer optimizer) {
        if (optimizer != null
                && optimizer.onlyFusedUpdates()
                && !settings.wantsFusedSteps(devices)
                && settings.wantsFusedStepsWhereOnlyFused(devices)
                && devices.length == 1) {
            logger.info(
                    "djl-amp fuses the optimizer steps on {}: DJL's PyTorch engine has no update"
                            + " for {} of its own",
                    devices[0],
                    optimizer.getInner().getClass().getSimpleName());
            return optimizer.planFusedSteps();
        }
        boolean wanted = optimizer != null && settings.wantsFusedSteps(devices);
        if (wanted && devices.length > 1) {
            logger.info(
                    "djl-amp keeps the per-parameter optimizer update (one host read per step):"
                            + " fused steps run on one device, the trainer has {}",
                    devices.length);
        }
        return wanted && devices.length == 1 && optimizer.planFusedSteps();
    }

    /** The loss scaler for steps that are fused or not, its state under {@code manager}. */
    static LossScaler newScaler(
            boolean fused,
            LossScaling scaling,
            AmpBackend backend,
            NDManager manager,
            Device device,
            int hostSyncInterval) {
        return fused
                ? LossScaler.onDevice(scaling, backend, manager, device, hostSyncInterval)
                : LossScaler.onHost(scaling, backend, manager, device);
    }
}
