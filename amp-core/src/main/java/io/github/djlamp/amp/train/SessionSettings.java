package io.github.djlamp.amp.train;

import ai.djl.Device;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.scale.LossScaling;
import java.util.Objects;
import java.util.function.Predicate;

/**
 * What an {@link AmpSession} needs of the training options: the loss scaling, the batches of a
 * gradient accumulation window, the steps between host reads of a device-resident scaler state, and
 * whether fused optimizer steps are wanted on a trainer's devices. {@code Amp.configure} builds it
 * from its {@code AmpOptions}; this package reads no option or system property of its own.
 */
public final class SessionSettings {

    private final LossScaling lossScaling;
    private final int accumulationSteps;
    private final int hostSyncInterval;
    private final Predicate<Device[]> readsEveryStep;
    private final Predicate<Device[]> fusedStepsWanted;
    private final Predicate<Device[]> fusedStepsWantedWhereOnlyFused;

    /**
     * Creates the settings.
     *
     * @param lossScaling the loss scaling, or null for the precision's default (dynamic for fp16,
     *     none for bf16 and fp32)
     * @param accumulationSteps batches whose gradients add up before one step, at least 1
     * @param hostSyncInterval steps between two host reads of a scaler state kept on the device, at
     *     least 1
     * @param fusedStepsWanted whether fused optimizer steps are wanted for a trainer on the given
     *     devices (where the optimizer has a fused version)
     * @throws IllegalArgumentException when {@code accumulationSteps} or {@code hostSyncInterval}
     *     is below 1
     * @throws NullPointerException when {@code fusedStepsWanted} is null
     */
    public SessionSettings(
            LossScaling lossScaling,
            int accumulationSteps,
            int hostSyncInterval,
            Predicate<Device[]> fusedStepsWanted) {
        this(lossScaling, accumulationSteps, hostSyncInterval, fusedStepsWanted, fusedStepsWanted);
    }

    /**
     * Creates the settings, with a second say on fused steps for an optimizer whose only update is
     * the fused one (DJL's {@code Nag}: DJL's PyTorch engine has no {@code nagUpdate}).
     *
     * @param lossScaling the loss scaling, or null for the precision's default (dynamic for fp16,
     *     none for bf16 and fp32)
     * @param accumulationSteps batches whose gradients add up before one step, at least 1
     * @param hostSyncInterval steps between two host reads of a scaler state kept on the device, at
     *     least 1
     * @param fusedStepsWanted whether fused optimizer steps are wanted for a trainer on the given
     *     devices (where the optimizer has a fused version)
     * @param fusedStepsWantedWhereOnlyFused the same for an optimizer DJL's engine cannot update
     * @throws IllegalArgumentException when {@code accumulationSteps} or {@code hostSyncInterval}
     *     is below 1
     * @throws NullPointerException when a predicate is null
     */
    public SessionSettings(
            LossScaling lossScaling,
            int accumulationSteps,
            int hostSyncInterval,
            Predicate<Device[]> fusedStepsWanted,
            Predicate<Device[]> fusedStepsWantedWhereOnlyFused) {
        this(
                lossScaling,
                accumulationSteps,
                hostSyncInterval,
                devices -> false,
                fusedStepsWanted,
                fusedStepsWantedWhereOnlyFused);
    }

    /**
     * Creates the settings, with a say on which trainers read a device-resident scaler state every
     * step whatever {@code hostSyncInterval} says ({@code FusedOptimizer.AUTO} off a GPU, when no
     * interval was set: a host read costs nothing there).
     *
     * @param lossScaling the loss scaling, or null for the precision's default (dynamic for fp16,
     *     none for bf16 and fp32)
     * @param accumulationSteps batches whose gradients add up before one step, at least 1
     * @param hostSyncInterval steps between two host reads of a scaler state kept on the device, at
     *     least 1
     * @param readsEveryStep whether a trainer on the given devices reads that state every step
     *     instead
     * @param fusedStepsWanted whether fused optimizer steps are wanted for a trainer on the given
     *     devices (where the optimizer has a fused version)
     * @param fusedStepsWantedWhereOnlyFused the same for an optimizer DJL's engine cannot update
     * @throws IllegalArgumentException when {@code accumulationSteps} or {@code hostSyncInterval}
     *     is below 1
     * @throws NullPointerException when a predicate is null
     */
    public SessionSettings(
            LossScaling lossScaling,
            int accumulationSteps,
            int hostSyncInterval,
            Predicate<Device[]> readsEveryStep,
            Predicate<Device[]> fusedStepsWanted,
            Predicate<Device[]> fusedStepsWantedWhereOnlyFused) {
        if (accumulationSteps < 1) {
            throw new IllegalArgumentException(
                    "accumulationSteps must be >= 1 batch, got "
                            + accumulationSteps
                            + ": set it with AmpOptions.builder().accumulationSteps(n)");
        }
        if (hostSyncInterval < 1) {
            throw new IllegalArgumentException(
                    "hostSyncInterval must be >= 1 step, got "
                            + hostSyncInterval
                            + ": set it with AmpOptions.builder().hostSyncInterval(n)");
        }
        this.lossScaling = lossScaling;
        this.accumulationSteps = accumulationSteps;
        this.hostSyncInterval = hostSyncInterval;
        this.readsEveryStep =
                Objects.requireNonNull(
                        readsEveryStep,
                        "readsEveryStep: pass devices -> false to keep the interval");
        this.fusedStepsWanted =
                Objects.requireNonNull(
                        fusedStepsWanted,
                        "fusedStepsWanted: pass devices -> false for DJL's own optimizer update");
        this.fusedStepsWantedWhereOnlyFused =
                Objects.requireNonNull(
                        fusedStepsWantedWhereOnlyFused,
                        "fusedStepsWantedWhereOnlyFused: pass the same as fusedStepsWanted");
    }

    /**
     * Returns the loss scaling as configured.
     *
     * @return the loss scaling, or null for the precision's default
     */
    public LossScaling getLossScaling() {
        return lossScaling;
    }

    /**
     * Returns the number of batches whose gradients add up before one optimizer step.
     *
     * @return batches per step, 1 for none
     */
    public int getAccumulationSteps() {
        return accumulationSteps;
    }

    /**
     * Returns the steps between host reads of a loss scaler state kept on the device.
     *
     * @return at least 1
     */
    public int getHostSyncInterval() {
        return hostSyncInterval;
    }

    /**
     * Returns the steps between host reads of a loss scaler state kept on the device for a trainer
     * on {@code devices}: 1 where these settings read every step there, else {@link
     * #getHostSyncInterval()}.
     *
     * @param devices the trainer's devices
     * @return at least 1
     */
    public int getHostSyncInterval(Device[] devices) {
        return readsEveryStep.test(devices) ? 1 : hostSyncInterval;
    }

    /**
     * Returns whether fused optimizer steps are wanted for a trainer on {@code devices}.
     *
     * @param devices the trainer's devices
     * @return true to fuse where the optimizer allows it
     */
    public boolean wantsFusedSteps(Device[] devices) {
        return fusedStepsWanted.test(devices);
    }

    /**
     * Returns whether fused optimizer steps are wanted for a trainer on {@code devices} when the
     * optimizer has no update of its own in DJL's engine (DJL's {@code Nag}).
     *
     * @param devices the trainer's devices
     * @return true to fuse
     */
    public boolean wantsFusedStepsWhereOnlyFused(Device[] devices) {
        return fusedStepsWantedWhereOnlyFused.test(devices);
    }

    /** The configured loss scaling, or the default of the precision computed in. */
    LossScaling lossScalingFor(Precision compute) {
        if (lossScaling != null) {
            return lossScaling;
        }
        return compute.needsLossScaling() ? LossScaling.dynamic() : LossScaling.none();
    }
}
