package io.github.djlamp.amp;

import ai.djl.Device;
import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether the optimizer step runs as one fused launch over every parameter that skips an overflowed
 * step on the device, as PyTorch's {@code fused=True} optimizers do beside GradScaler, or as DJL's
 * own update, one native call per parameter after a host read of the step's overflow flag. Set with
 * {@link AmpOptions.Builder#fusedOptimizer(FusedOptimizer)}.
 *
 * <p>Fused steps cover DJL's Sgd, Adam, AdamW and Nag; any other optimizer keeps DJL's update
 * whatever this says (the reason is logged). With fused steps the loss scaler's state stays on the
 * device and is read on the host every {@link AmpOptions#getHostSyncInterval()} steps (and when the
 * model is saved), so divergence and the scaler's Metrics come at those reads; {@link #AUTO} on the
 * CPU reads it every step unless that interval was set.
 */
public enum FusedOptimizer {

    /**
     * Fused when the trainer has one device, GPU or CPU; DJL's own update on several devices. On a
     * GPU the fused step saves the host read per step that stalls the device (11-16 ms a step
     * measured on an H100); on the CPU it replaces DJL's one native update per parameter with one
     * launch ({@code bench/RESULTS.md}, "Fused optimizer step in training on the CPU"). On the CPU,
     * where a host read costs nothing, the loss scaler's state is read on the host every step
     * unless {@link AmpOptions.Builder#hostSyncInterval(int)} was set, so divergence checks and the
     * scaler's Metrics come every step, as with DJL's update. The system property {@value
     * #PROPERTY} ({@code on}, {@code off}, {@code auto}; {@code true} and {@code false} also work)
     * decides in its place when set: it is read once, when {@link AmpOptions} are built (by {@code
     * Amp.configure} for its default options), and the log says so.
     */
    AUTO,

    /** Fused whenever the optimizer has a fused version and the trainer has one device. */
    ON,

    /** Never fused: DJL's own per-parameter update, with one host read of the verdict per step. */
    OFF;

    /** The system property that decides for {@link #AUTO} when set. */
    public static final String PROPERTY = "djlamp.fusedOptimizer";

    private static final Logger logger = LoggerFactory.getLogger(FusedOptimizer.class);

    /**
     * Returns whether steps should be fused for a trainer on {@code devices}, when the optimizer
     * allows it. Reads no system property: {@link AmpOptions#getFusedOptimizer()} already holds
     * what {@value #PROPERTY} decided for {@link #AUTO}.
     *
     * @param devices the trainer's devices
     * @return true to fuse
     */
    public boolean wantsFusedSteps(Device[] devices) {
        switch (this) {
            case ON:
                return true;
            case OFF:
                return false;
            case AUTO:
                return devices.length == 1;
            default:
                throw new AssertionError("unknown FusedOptimizer " + this);
        }
    }

    /**
     * Returns whether steps should be fused for a trainer on {@code devices} when the optimizer has
     * no update of its own in DJL's engine (DJL's {@code Nag}: DJL's PyTorch engine has no {@code
     * nagUpdate}), so that the fused step is the only one there is: {@link #AUTO} fuses on any
     * single device, as it does for every optimizer with a fused version; {@link #ON} as always;
     * {@link #OFF} never.
     *
     * @param devices the trainer's devices
     * @return true to fuse
     */
    public boolean wantsFusedStepsWhereOnlyFused(Device[] devices) {
        switch (this) {
            case ON:
                return true;
            case OFF:
                return false;
            case AUTO:
                return devices.length == 1;
            default:
                throw new AssertionError("unknown FusedOptimizer " + this);
        }
    }

    /**
     * Returns whether, with this setting, a trainer on {@code devices} reads the loss scaler's
     * state on the host every step when no host-sync interval was set: {@link #AUTO} off a GPU,
     * where a host read costs nothing.
     */
    boolean readsEveryStepByDefault(Device[] devices) {
        return this == AUTO && !(devices.length == 1 && devices[0].isGpu());
    }

    /**
     * Returns the setting that {@link AmpOptions} keep: an explicit ON or OFF as it is, AUTO as
     * {@value #PROPERTY} says when that property is set, read here, once, and logged.
     *
     * @throws IllegalArgumentException when the property holds something other than on, off, auto,
     *     true or false
     */
    FusedOptimizer withPropertyApplied() {
        if (this != AUTO) {
            return this;
        }
        String value = System.getProperty(PROPERTY);
        if (value == null) {
            return AUTO;
        }
        FusedOptimizer decided = parse(value);
        logger.info(
                "djl-amp: -D{}={} decides FusedOptimizer.AUTO: {}",
                PROPERTY,
                value,
                decided == AUTO
                        ? "AUTO (fused steps on one device, DJL's update on several)"
                        : decided == ON
                                ? "ON (fused steps wherever the optimizer has a fused version)"
                                : "OFF (DJL's own per-parameter update)");
        return decided;
    }

    private static FusedOptimizer parse(String value) {
        switch (value.trim().toLowerCase(Locale.ROOT)) {
            case "on":
            case "true":
                return ON;
            case "off":
            case "false":
                return OFF;
            case "auto":
                return AUTO;
            default:
                throw new IllegalArgumentException(
                        "-D"
                                + PROPERTY
                                + "="
                                + value
                                + " is not a setting: use on, off or auto (true and false also"
                                + " work), or leave it unset for auto");
        }
    }
}
