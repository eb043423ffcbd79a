package io.github.djlamp.amp.scale;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.List;

/**
 * The loss scaling state machine of one trainer, run on PyTorch's own GradScaler kernels.
 *
 * <p>One step goes through three verbs, in this order, as with PyTorch's {@code GradScaler}:
 *
 * <ol>
 *   <li>{@link #scale(NDArray)}: the loss times the scale, what backward must see (any number of
 *       times: once per device split or per accumulated micro-batch);
 *   <li>{@link #unscaleAndCheck(GradientSet, NDManager)}: one fused unscale and Inf/NaN check over
 *       every device's gradients; {@link #isStepSkipped()} then says whether the optimizer must
 *       skip this step;
 *   <li>{@link #update()}: the scale update (back off on overflow, grow after a run of clean
 *       steps).
 * </ol>
 *
 * <p>A verb out of this order throws {@link IllegalStateException} naming the verb to call instead.
 *
 * <p>Where the state lives is chosen once, when the scaler is made. {@link #onHost} keeps the scale
 * and growth tracker on the device, updated by {@code _amp_update_scale_}, and reads the verdict on
 * the host every step: a host mirror, advanced from the same verdict by the same arithmetic, serves
 * reports and decisions without further reads. {@link #onDevice} is for steps whose optimizer skips
 * on the device (fused optimizer steps): the whole state (scale, growth tracker, hysteresis count,
 * skipped steps, collapses, a fixed scale's run of overflows) is updated on the device by {@link
 * AmpBackend#updateScaleWithHysteresis}, with no read per step, as in PyTorch; the host mirror is
 * refreshed by one read every {@code hostSyncInterval} steps, or at once when a getter asks for a
 * value the mirror no longer holds.
 *
 * <p>The state lives on a sub-manager of the manager given at creation, named "djl-amp loss
 * scaler", freed by {@link #close()} or with that manager. Not thread-safe: one scaler per trainer.
 */
public interface LossScaler extends AutoCloseable {

    /** Where a step stands. */
    enum Phase {
        /** Waiting for gradients: scale the loss, run backward. */
        READY,
        /** Gradients are unscaled and checked; step (or skip), then call {@link #update()}. */
        UNSCALED
    }

    /**
     * Creates a scaler that reads each step's verdict on the host (one read per step).
     *
     * @param config the loss scaling configuration
     * @param backend the engine layer that runs the kernels
     * @param parent a manager of the engine; the scaler's state lives on a sub-manager of it
     * @param device the device of the scale state (the trainer's first device)
     * @return the scaler
     */
    static LossScaler onHost(
            LossScaling config, AmpBackend backend, NDManager parent, Device device) {
        return new HostLossScaler(config, backend, parent, device);
    }

    /**
     * Creates a scaler whose whole state stays on the device, for steps whose optimizer skips on
     * the device: no host read per step; the host mirror is refreshed every {@code
     * hostSyncInterval} steps (that step's verdict is then known on the host too) and whenever a
     * getter asks. A scale that collapses, or a fixed scale that overflows step after step, is
     * found at the next read and thrown by the {@link #update()} after it. When scaling is off
     * there is no state to keep: the scaler is {@link #onHost}'s.
     *
     * @param config the loss scaling configuration
     * @param backend the engine layer that runs the kernels
     * @param parent a manager of the engine; the scaler's state lives on a sub-manager of it
     * @param device the device of the scale state (the trainer's only device)
     * @param hostSyncInterval steps between host reads, at least 1
     * @return the scaler
     * @throws IllegalArgumentException when {@code hostSyncInterval} is below 1
     */
    static LossScaler onDevice(
            LossScaling config,
            AmpBackend backend,
            NDManager parent,
            Device device,
            int hostSyncInterval) {
        if (hostSyncInterval < 1) {
            throw new IllegalArgumentException(
                    "hostSyncInterval must be >= 1 step, got " + hostSyncInterval);
        }
        if (!config.isEnabled()) {
            return onHost(config, backend, parent, device);
        }
        return new DeviceLossScaler(config, backend, parent, device, hostSyncInterval);
    }

    /**
     * Returns the configuration.
     *
     * @return the loss scaling configuration
     */
    LossScaling getConfig();

    /**
     * Returns the current loss scale (1 when scaling is off). No device read, unless the state is
     * on the device and the mirror is stale: then one.
     *
     * @return the scale
     */
    float getScale();

    /**
     * Returns the device copy of the scale, a 0-dimensional FP32 array owned by the scaler.
     *
     * @return the scale on the scaler's device
     */
    NDArray getScaleArray();

    /**
     * Returns the device flag of the current step, a 0-dimensional FP32 array owned by the scaler:
     * non-zero after {@link #unscaleAndCheck(GradientSet, NDManager)} found Inf or NaN. Fused
     * optimizer steps read it on the device to skip.
     *
     * @return the found-inf flag on the scaler's device
     */
    NDArray getFoundInfArray();

    /**
     * Lists every array a step updates on the device: the found-inf flag, and where the state is on
     * the device the scale, its growth and backoff counts, the skipped steps and what the host
     * reads of collapses and overflow runs. A captured step's check compares them and its graph
     * holds them.
     *
     * @param into the list to add them to, in an order that does not change while they do not
     */
    void deviceStateArrays(List<? super NDArray> into);

    /**
     * Returns the clean steps counted towards the next growth. Reads the device as {@link
     * #getScale()} does.
     *
     * @return the growth tracker
     */
    int getGrowthTracker();

    /**
     * Returns the number of steps completed by {@link #update()}, skipped ones included. No device
     * read.
     *
     * @return steps
     */
    long getSteps();

    /**
     * Returns the number of steps skipped for non-finite gradients. Reads the device as {@link
     * #getScale()} does.
     *
     * @return skipped steps
     */
    long getSkippedSteps();

    /**
     * Returns where the current step stands.
     *
     * @return the phase
     */
    Phase getPhase();

    /**
     * Returns whether the current step must be skipped: valid between {@link
     * #unscaleAndCheck(GradientSet, NDManager)} and {@link #update()}. No device read, unless the
     * verdict was left on the device (see {@link #isVerdictKnown()}): then one.
     *
     * @return true when a gradient held Inf or NaN
     * @throws IllegalStateException when called before the step's gradients were checked
     */
    boolean isStepSkipped();

    /**
     * Returns whether the state lives on the device, read on the host only now and then.
     *
     * @return true for a scaler made by {@link #onDevice} with scaling on
     */
    boolean isStateOnDevice();

    /**
     * Returns whether the host mirror (scale, tracker, skipped steps) holds the current values, so
     * that reading them costs no device read. Always true when the state is on the host.
     *
     * @return true when the getters would not read the device
     */
    boolean isMirrorFresh();

    /**
     * Returns whether this step's overflow verdict is on the host (always, unless the state is on
     * the device and this step was not a host-read step).
     *
     * @return true when {@link #isStepSkipped()} answers without reading the device
     */
    boolean isVerdictKnown();

    /**
     * Returns how many times this scaler read its device state or verdict on the host.
     *
     * @return host reads so far
     */
    long getHostReads();

    /**
     * Returns the longest run of consecutive overflowing steps the host has seen since the last
     * call, and starts counting again: a fixed scale's failure, found at host reads when the state
     * is on the device.
     *
     * @return the longest run of overflows seen
     */
    int takeLongestOverflowRun();

    /**
     * Refreshes the host mirror from the device now, if it is stale (one host read); does nothing
     * when the state is on the host.
     *
     * @throws LossScaleCollapsedException when the device state shows the scale collapsed since the
     *     last read (between steps only)
     */
    void syncToHost();

    /** Restarts the count of consecutive overflowing steps, after the failure it reported. */
    void resetOverflowRun();

    /**
     * Returns the loss multiplied by the current scale: pass the result to backward. Metrics should
     * keep using the unscaled loss. No device read.
     *
     * @param loss the unscaled loss, fp32 or fp16
     * @return the scaled loss (the same array when scaling is off)
     * @throws IllegalStateException when the step's gradients were already checked
     * @throws AmpException when the loss is bf16 (DJL's backward on bf16 terminates the JVM)
     */
    NDArray scale(NDArray loss);

    /**
     * Unscales every gradient in place by 1/scale and checks them all for Inf/NaN with PyTorch's
     * fused kernel, one call per device, then reads the merged verdict once (with the state on the
     * device: only every {@code hostSyncInterval} steps; in between it returns false and the
     * verdict stays on the device, see {@link #isVerdictKnown()}).
     *
     * @param gradients every device's gradients of this step
     * @param stepManager a manager closed at the end of the step, for per-step arrays
     * @return true when the step must be skipped
     * @throws IllegalStateException when called twice in one step
     */
    boolean unscaleAndCheck(GradientSet gradients, NDManager stepManager);

    /**
     * Ends the step: counts it, and moves the scale as the configuration says (on overflow: skip
     * counted, backoff after {@code hysteresis} overflows; otherwise growth after {@code
     * growthInterval} clean steps, capped at the maximum). No device read.
     *
     * @throws LossScaleCollapsedException when an overflow would take the scale below its minimum
     * @throws IllegalStateException when the step's gradients were not checked first
     */
    void update();

    /**
     * For captured steps ({@code AmpSession.captureStep}): with {@code deferred} true, the host
     * read every {@code hostSyncInterval} steps is no longer made inside the step (a read inside a
     * capture would end it) but is reported due by {@link #takeDueRead()}, for the caller to make
     * between steps ({@link #syncToHost()}). A state on the host has nothing to defer.
     *
     * @param deferred whether scheduled reads wait for the caller
     */
    void deferScheduledReads(boolean deferred);

    /**
     * Returns whether a deferred scheduled read is due, and if so restarts the schedule.
     *
     * @return true when {@code hostSyncInterval} steps passed since the last scheduled read
     */
    boolean takeDueRead();

    /**
     * Counts on the host a step that a captured graph replayed on the device: the step's {@link
     * #unscaleAndCheck} and {@link #update()} ran there and none of their Java code, so what they
     * keep on the host (the step count, the read schedule, the mirror's freshness) follows here.
     *
     * @throws IllegalStateException when the state is on the host (its steps cannot be captured) or
     *     in the middle of a step
     */
    void countReplayedStep();

    /**
     * Before a captured step's region runs: remembers what the host counts (the step count, the
     * place in the read schedule), which {@link #abandonStep()} takes back if the capture does not
     * hold.
     *
     * @throws IllegalStateException in the middle of a step
     */
    void beginCapturedStep();

    /**
     * Forgets a step whose capture the device's runtime invalidated, at once or at its end: the
     * step starts again, so its phase returns to ready, what it was to be checked is dropped, and
     * what its Java code counted on the host since {@link #beginCapturedStep()} is taken back (a
     * capture runs nothing on the device, so the step is counted once, when it runs again).
     */
    void abandonStep();

    /**
     * Returns a snapshot of the state, for checkpoints. Reads the device as {@link #getScale()}
     * does.
     *
     * @return the state
     */
    ScalerState state();

    /**
     * Restores a snapshot taken by {@link #state()}, on the host and on the device.
     *
     * @param state the state to continue from
     * @throws IllegalStateException in the middle of a step
     */
    void restore(ScalerState state);

    /** Frees the device state. */
    @Override
    void close();
}
