package io.github.djlamp.amp.scale;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.AmpException;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.DeviceScaleState;
import java.util.ArrayList;
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
 *       every device's gradients, one host read of the verdict (none with the state on the device,
 *       between its periodic reads); {@link #isStepSkipped()} then says whether the optimizer must
 *       skip this step;
 *   <li>{@link #update()}: the scale update (back off on overflow, grow after a run of clean
 *       steps), on the device through {@code _amp_update_scale_}.
 * </ol>
 *
 * <p>The scale and growth tracker live on the device; a host mirror, advanced from the same verdict
 * by the same arithmetic, serves reports and decisions without further device reads.
 *
 * <p>When the optimizer step itself skips on the device (fused optimizer steps), {@link
 * #keepStateOnDevice(int)} removes the per-step read as PyTorch does: the whole state (scale,
 * growth tracker, hysteresis count, skipped steps, collapses, a fixed scale's run of overflows) is
 * updated on the device by {@link AmpBackend#updateScaleWithHysteresis}, and the host mirror is
 * refreshed by one read every {@code hostSyncInterval} steps, or at once when a getter asks for a
 * value the mirror no longer holds. Not thread-safe: one scaler per trainer.
 */
public final class LossScaler implements AutoCloseable {

    /** Where a step stands. */
    public enum Phase {
        /** Waiting for gradients: scale the loss, run backward. */
        READY,
        /** Gradients are unscaled and checked; step (or skip), then call {@link #update()}. */
        UNSCALED
    }

    private static final int NAMES_IN_REPORTS = 5;

    private final LossScaling config;
    private final AmpBackend backend;
    private final NDManager manager;
    private NDArray scaleTensor;
    private NDArray growthTracker;
    private NDArray foundInf;

    private float hostScale;
    private int hostTracker;
    private int overflowsSinceChange;
    private long steps;
    private long skippedSteps;
    private Phase phase = Phase.READY;
    private boolean overflow;
    private final List<NDArray> lossesThisStep = new ArrayList<>();
    private LossScaleCollapsedException collapse;

    // the state kept on the device (null: the verdict is read on the host every step)
    private NDManager deviceManager;
    private DeviceScaleState deviceState;
    private NDArray deviceScale; // a 0-dimensional view of deviceState's scale
    private NDArray one; // FP32 0-dimensional 1
    private NDArray collapses; // FP32 (1): collapses since the last host read
    private NDArray overflowRun; // FP32 (1): consecutive overflows (a fixed scale's failure)
    private NDArray overflowRunPeak; // FP32 (1): the longest run since the last host read
    private int hostSyncInterval;
    private int stepsSinceSync;
    private boolean mirrorFresh = true;
    private boolean verdictKnown = true;
    private GradientSet checked;
    private int hostOverflowRun;
    private int longestOverflowRun;
    private long hostReads;
    private LossScaleCollapsedException lateCollapse;

    /**
     * Creates a scaler whose state lives on {@code device}.
     *
     * @param config the loss scaling configuration
     * @param backend the engine layer that runs the kernels
     * @param parent a manager of the engine; the scaler's state lives on a sub-manager of it
     * @param device the device of the scale state (the trainer's first device)
     */
    public LossScaler(LossScaling config, AmpBackend backend, NDManager parent, Device device) {
        this.config = config;
        this.backend = backend;
        this.manager = parent.newSubManager(device);
        this.manager.setName("djl-amp loss scaler");
        restore(new ScalerState(config.getInitScale(), 0, 0, 0, 0));
    }

    /**
     * Returns the configuration.
     *
     * @return the loss scaling configuration
     */
    public LossScaling getConfig() {
        return config;
    }

    /**
     * Returns the current loss scale (1 when scaling is off).
     *
     * @return the scale
     */
    public float getScale() {
        if (!config.isEnabled()) {
            return 1f;
        }
        refreshMirror();
        return hostScale;
    }

    /**
     * Returns the device copy of the scale, a 0-dimensional FP32 array owned by the scaler.
     *
     * @return the scale on the scaler's device
     */
    public NDArray getScaleArray() {
        return deviceState != null ? deviceScale : scaleTensor;
    }

    /**
     * Returns the device flag of the current step, a 0-dimensional FP32 array owned by the scaler:
     * non-zero after {@link #unscaleAndCheck(GradientSet, NDManager)} found Inf or NaN. Fused
     * optimizer steps read it on the device to skip.
     *
     * @return the found-inf flag on the scaler's device
     */
    public NDArray getFoundInfArray() {
        return foundInf;
    }

    /**
     * Returns the clean steps counted towards the next growth.
     *
     * @return the growth tracker
     */
    public int getGrowthTracker() {
        refreshMirror();
        return hostTracker;
    }

    /**
     * Returns the number of steps completed by {@link #update()}, skipped ones included.
     *
     * @return steps
     */
    public long getSteps() {
        return steps;
    }

    /**
     * Returns the number of steps skipped for non-finite gradients.
     *
     * @return skipped steps
     */
    public long getSkippedSteps() {
        refreshMirror();
        return skippedSteps;
    }

    /**
     * Returns where the current step stands.
     *
     * @return the phase
     */
    public Phase getPhase() {
        return phase;
    }

    /**
     * Returns whether the current step must be skipped: valid between {@link
     * #unscaleAndCheck(GradientSet, NDManager)} and {@link #update()}.
     *
     * @return true when a gradient held Inf or NaN
     * @throws AmpException when called before the step's gradients were checked
     */
    public boolean isStepSkipped() {
        if (phase != Phase.UNSCALED) {
            throw new AmpException(
                    "No overflow verdict for this step yet: call unscaleAndCheck(...) after"
                            + " backward and before the optimizer step (with EasyTrain, add"
                            + " AmpTrainingListener through Amp.configure)");
        }
        if (!verdictKnown) {
            readDevice(); // asked for: one host read
        }
        return overflow;
    }

    /**
     * Keeps the whole state on the device from now on, for steps whose optimizer skips on the
     * device: no host read per step; the host mirror is refreshed every {@code hostSyncInterval}
     * steps (that step's verdict is then known on the host too) and whenever a getter asks. A scale
     * that collapses, or a fixed scale that overflows step after step, is found at the next read
     * and thrown by the {@link #update()} after it. Does nothing when scaling is off.
     *
     * @param hostSyncInterval steps between host reads, at least 1
     * @throws AmpException in the middle of a step
     */
    public void keepStateOnDevice(int hostSyncInterval) {
        if (hostSyncInterval < 1) {
            throw new IllegalArgumentException(
                    "hostSyncInterval must be >= 1 step, got " + hostSyncInterval);
        }
        if (phase != Phase.READY) {
            throw new AmpException(
                    "keepStateOnDevice(...) in the middle of a step: call update() first");
        }
        if (!config.isEnabled()) {
            return;
        }
        this.hostSyncInterval = hostSyncInterval;
        if (deviceState == null) {
            createDeviceState(state());
        }
    }

    /**
     * Returns whether the state lives on the device, read on the host only now and then.
     *
     * @return true after {@link #keepStateOnDevice(int)}
     */
    public boolean isStateOnDevice() {
        return deviceState != null;
    }

    /**
     * Returns whether the host mirror (scale, tracker, skipped steps) holds the current values, so
     * that reading them costs no device read. Always true when the state is on the host.
     *
     * @return true when the getters would not read the device
     */
    public boolean isMirrorFresh() {
        return mirrorFresh;
    }

    /**
     * Returns whether this step's overflow verdict is on the host (always, unless the state is on
     * the device and this step was not a host-read step).
     *
     * @return true when {@link #isStepSkipped()} answers without reading the device
     */
    public boolean isVerdictKnown() {
        return verdictKnown;
    }

    /**
     * Returns how many times this scaler read its device state or verdict on the host.
     *
     * @return host reads so far
     */
    public long getHostReads() {
        return hostReads;
    }

    /**
     * Returns the longest run of consecutive overflowing steps the host has seen since the last
     * call, and starts counting again: a fixed scale's failure, found at host reads when the state
     * is on the device.
     *
     * @return the longest run of overflows seen
     */
    public int takeLongestOverflowRun() {
        int run = longestOverflowRun;
        longestOverflowRun = 0;
        return run;
    }

    /**
     * Refreshes the host mirror from the device now, if it is stale (one host read).
     *
     * @throws LossScaleCollapsedException when the device state shows the scale collapsed since the
     *     last read (between steps only)
     */
    public void syncToHost() {
        refreshMirror();
        if (phase == Phase.READY) {
            throwLateCollapse();
        }
    }

    /** Restarts the count of consecutive overflowing steps, after the failure it reported. */
    public void resetOverflowRun() {
        hostOverflowRun = 0;
        longestOverflowRun = 0;
        if (overflowRun != null) {
            backend.zero(new NDList(overflowRun, overflowRunPeak));
        }
    }

    private void refreshMirror() {
        if (!mirrorFresh || (phase == Phase.UNSCALED && !verdictKnown)) {
            readDevice();
        }
    }

    /**
     * Returns the loss multiplied by the current scale: pass the result to backward. Metrics should
     * keep using the unscaled loss.
     *
     * @param loss the unscaled loss, fp32 or fp16
     * @return the scaled loss (the same array when scaling is off)
     * @throws AmpException when the step's gradients were already checked, or when the loss is bf16
     *     (DJL's backward on bf16 terminates the JVM)
     */
    public NDArray scale(NDArray loss) {
        backend.requireDjlSafe(loss, "backward");
        if (phase != Phase.READY) {
            throw new AmpException(
                    "A loss was scaled after this step's gradients were already unscaled and"
                            + " checked (AmpSession.unscaleGradients()): finish the step with"
                            + " amp.step() first; to accumulate micro-batches, run every"
                            + " backward before amp.unscaleGradients() or amp.step()");
        }
        if (!config.isEnabled()) {
            return loss;
        }
        lossesThisStep.add(loss);
        // on the device: the scale is a device value, as in GradScaler.scale
        return deviceState != null ? loss.mul(deviceScale) : loss.mul(hostScale);
    }

    /**
     * Unscales every gradient in place by 1/scale and checks them all for Inf/NaN with PyTorch's
     * fused kernel, one call per device, then reads the merged verdict once (with the state on the
     * device: only every {@code hostSyncInterval} steps; in between it returns false and the
     * verdict stays on the device, see {@link #isVerdictKnown()}).
     *
     * @param gradients every device's gradients of this step
     * @param stepManager a manager closed at the end of the step, for per-step arrays
     * @return true when the step must be skipped
     * @throws AmpException when called twice in one step
     */
    public boolean unscaleAndCheck(GradientSet gradients, NDManager stepManager) {
        if (phase != Phase.READY) {
            throw new AmpException(
                    "This step's gradients were already unscaled and checked"
                            + " (AmpSession.unscaleGradients()): call amp.step() now, which"
                            + " updates the weights or, on overflow, skips the update, instead of"
                            + " checking them again");
        }
        phase = Phase.UNSCALED;
        collapse = null;
        verdictKnown = true;
        if (!config.isEnabled() || gradients.isEmpty()) {
            overflow = false;
            return false;
        }
        backend.zero(new NDList(foundInf));
        NDArray deviceInverse = null;
        if (deviceState != null) {
            // an array, not a Number: DJL's rdiv(Number) leaks its scalar onto the manager
            deviceInverse = one.div(deviceScale);
            deviceInverse.attach(stepManager);
        }
        float inverse = (float) (1.0 / hostScale);
        boolean first = true;
        for (NDList group : gradients.byReplica().values()) {
            Device device = group.get(0).getDevice();
            NDArray inv =
                    deviceInverse != null
                            ? deviceInverse.toDevice(device, false)
                            : stepManager.create(inverse).toDevice(device, false);
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
        if (deviceState != null) {
            checked = gradients;
            overflow = false;
            verdictKnown = false;
            stepsSinceSync++;
            if (stepsSinceSync < hostSyncInterval) {
                return false; // decided on the device; nothing read
            }
            readDevice();
            return overflow;
        }
        hostReads++;
        overflow = backend.readFloat(foundInf) != 0f;
        predictCollapse(gradients);
        return overflow;
    }

    private void predictCollapse(GradientSet gradients) {
        if (overflow && backoffWouldCollapse()) {
            // named now: the optimizer step that follows clears these gradients
            collapse =
                    new LossScaleCollapsedException(
                            config.getMinScale(),
                            gradients == null ? List.of() : gradients.nonFinite(NAMES_IN_REPORTS),
                            anyLossNonFinite());
        }
    }

    /**
     * One host read of the device state (and of this step's verdict, between the check and the
     * update): refreshes the mirror and notes collapses and overflow runs since the last read.
     */
    private void readDevice() {
        if (deviceState == null) {
            return;
        }
        float[] values;
        try (NDManager scratch = deviceManager.newSubManager()) {
            NDList parts = new NDList();
            for (NDArray a :
                    new NDArray[] {
                        deviceState.getScale(),
                        deviceState.getGrowthTracker(),
                        deviceState.getOverflowsSinceChange(),
                        deviceState.getSkippedSteps(),
                        collapses,
                        overflowRun,
                        overflowRunPeak
                    }) {
                NDArray asFloat = a.toType(DataType.FLOAT32, true);
                asFloat.attach(scratch);
                parts.add(asFloat);
            }
            NDArray flag = foundInf.reshape(1);
            flag.attach(scratch);
            parts.add(flag);
            NDArray packed = NDArrays.concat(parts);
            packed.attach(scratch);
            values = backend.readFloats(packed);
        }
        hostReads++;
        hostScale = values[0];
        hostTracker = (int) values[1];
        overflowsSinceChange = (int) values[2];
        skippedSteps = (long) values[3];
        hostOverflowRun = (int) values[5];
        longestOverflowRun = Math.max(longestOverflowRun, (int) values[6]);
        backend.zero(new NDList(collapses, overflowRunPeak));
        mirrorFresh = true;
        stepsSinceSync = 0;
        if (values[4] != 0f && lateCollapse == null) {
            // found late: the collapsing step's gradients are gone; this step's are named
            lateCollapse =
                    new LossScaleCollapsedException(
                            config.getMinScale(),
                            phase == Phase.UNSCALED && checked != null
                                    ? checked.nonFinite(NAMES_IN_REPORTS)
                                    : List.of(),
                            false);
        }
        if (phase == Phase.UNSCALED && !verdictKnown) {
            overflow = values[7] != 0f;
            verdictKnown = true;
            predictCollapse(checked);
        }
    }

    /**
     * Ends the step: counts it, and moves the scale as the configuration says (on overflow: skip
     * counted, backoff after {@code hysteresis} overflows; otherwise growth after {@code
     * growthInterval} clean steps, capped at the maximum).
     *
     * @throws LossScaleCollapsedException when an overflow would take the scale below its minimum
     * @throws AmpException when the step's gradients were not checked first
     */
    public void update() {
        if (phase != Phase.UNSCALED) {
            throw new AmpException(
                    "update() before unscaleAndCheck(...): check the step's gradients first");
        }
        try {
            // counted first: a step that throws (collapse) still counts as taken and skipped
            steps++;
            if (deviceState != null) {
                updateOnDevice();
                if (!verdictKnown) {
                    mirrorFresh = false;
                    throwLateCollapse();
                    return;
                }
            }
            if (config.getMode() == LossScaling.Mode.DYNAMIC) {
                updateDynamic();
            } else if (overflow) {
                skippedSteps++;
            }
            hostOverflowRun = overflow ? hostOverflowRun + 1 : 0;
            longestOverflowRun = Math.max(longestOverflowRun, hostOverflowRun);
            throwLateCollapse();
        } finally {
            phase = Phase.READY;
            lossesThisStep.clear();
            collapse = null;
            checked = null;
            verdictKnown = true;
        }
    }

    private void throwLateCollapse() {
        if (lateCollapse != null && config.getMode() == LossScaling.Mode.DYNAMIC) {
            LossScaleCollapsedException late = lateCollapse;
            lateCollapse = null;
            throw late;
        }
        lateCollapse = null;
    }

    /** The step's update decided on the device: nothing is read. */
    private void updateOnDevice() {
        if (config.getMode() == LossScaling.Mode.DYNAMIC) {
            backend.updateScaleWithHysteresis(deviceState, foundInf, config);
            if (!verdictKnown) {
                // a known verdict predicts the collapse on the host instead
                collapses.addi(deviceState.getCollapsed());
            }
            return;
        }
        // a fixed scale: count the skip and the run of overflows (its failure)
        try (NDManager scratch = deviceManager.newSubManager()) {
            NDArray found = foundInf.neq(0f);
            found.attach(scratch);
            NDArray count = found.toType(DataType.INT64, false);
            count.attach(scratch);
            deviceState.getSkippedSteps().addi(count.reshape(1));
            NDArray flag = found.toType(DataType.FLOAT32, false);
            flag.attach(scratch);
            // run = (run + 1) * found; peak = max(peak, run)
            overflowRun.addi(1f).muli(flag);
            NDArray peak = overflowRunPeak.maximum(overflowRun);
            peak.attach(scratch);
            backend.copy(new NDList(overflowRunPeak), new NDList(peak));
        }
    }

    private void updateDynamic() {
        if (overflow) {
            skippedSteps++;
            overflowsSinceChange++;
            if (overflowsSinceChange < config.getHysteresis()) {
                // tolerated: the tracker resets, the scale stays
                runKernel(config.getGrowthFactor(), 1.0);
                hostTracker = 0;
                return;
            }
            if (collapse != null) {
                throw collapse;
            }
            float backedOff = (float) (hostScale * config.getBackoffFactor());
            runKernel(config.getGrowthFactor(), config.getBackoffFactor());
            hostScale = backedOff;
            hostTracker = 0;
            overflowsSinceChange = 0;
            return;
        }
        double growth = config.getGrowthFactor();
        boolean grows = hostTracker + 1 == config.getGrowthInterval();
        if (grows && hostScale * growth > config.getMaxScale()) {
            growth = config.getMaxScale() / (double) hostScale;
        }
        runKernel(growth, config.getBackoffFactor());
        if (grows) {
            float grown = (float) (hostScale * growth);
            if (Float.isFinite(grown)) {
                if (grown != hostScale) {
                    overflowsSinceChange = 0;
                }
                hostScale = grown;
            }
            hostTracker = 0;
        } else {
            hostTracker++;
        }
    }

    /** Whether backing off now would take a dynamic scale below its minimum. */
    private boolean backoffWouldCollapse() {
        return config.getMode() == LossScaling.Mode.DYNAMIC
                && overflowsSinceChange + 1 >= config.getHysteresis()
                && (float) (hostScale * config.getBackoffFactor()) < config.getMinScale();
    }

    private void runKernel(double growth, double backoff) {
        if (deviceState != null) {
            return; // the device state was updated by updateOnDevice
        }
        backend.updateScale(
                scaleTensor, growthTracker, foundInf, growth, backoff, config.getGrowthInterval());
    }

    private boolean anyLossNonFinite() {
        for (NDArray loss : lossesThisStep) {
            if (!loss.isReleased()) {
                try (NDManager scratch = loss.getManager().newSubManager()) {
                    NDArray asFloat = loss.toType(DataType.FLOAT32, true);
                    asFloat.attach(scratch);
                    NDArray sum = asFloat.sum();
                    sum.attach(scratch);
                    hostReads++;
                    if (!Float.isFinite(backend.readFloat(sum))) {
                        return true;
                    }
                }
            }
        }
        return false;
    }

    /**
     * Returns a snapshot of the state, for checkpoints.
     *
     * @return the state
     */
    public ScalerState state() {
        refreshMirror();
        return new ScalerState(hostScale, hostTracker, overflowsSinceChange, steps, skippedSteps);
    }

    /**
     * Restores a snapshot taken by {@link #state()}, on the host and on the device.
     *
     * @param state the state to continue from
     * @throws AmpException in the middle of a step
     */
    public void restore(ScalerState state) {
        if (phase != Phase.READY) {
            throw new AmpException("restore(...) in the middle of a step: call update() first");
        }
        NDArray newScale = manager.create(state.getScale());
        NDArray newTracker = manager.create(state.getGrowthTracker());
        NDArray newFound = manager.zeros(new Shape(), DataType.FLOAT32);
        if (scaleTensor != null) {
            scaleTensor.close();
            growthTracker.close();
            foundInf.close();
        }
        scaleTensor = newScale;
        growthTracker = newTracker;
        foundInf = newFound;
        hostScale = state.getScale();
        hostTracker = state.getGrowthTracker();
        overflowsSinceChange = state.getOverflowsSinceChange();
        steps = state.getSteps();
        skippedSteps = state.getSkippedSteps();
        hostOverflowRun = 0;
        longestOverflowRun = 0;
        lateCollapse = null;
        mirrorFresh = true;
        stepsSinceSync = 0;
        if (deviceState != null) {
            createDeviceState(state);
        }
    }

    private void createDeviceState(ScalerState state) {
        NDManager fresh = manager.newSubManager();
        fresh.setName("djl-amp loss scaler device state");
        DeviceScaleState newState = new DeviceScaleState(state, fresh, foundInf.getDevice());
        if (deviceManager != null) {
            deviceManager.close();
        }
        deviceManager = fresh;
        deviceState = newState;
        deviceScale = newState.getScale().reshape(new Shape());
        deviceScale.attach(fresh);
        one = fresh.create(1f);
        collapses = fresh.zeros(new Shape(1), DataType.FLOAT32);
        overflowRun = fresh.create(new float[] {hostOverflowRun});
        overflowRunPeak = fresh.zeros(new Shape(1), DataType.FLOAT32);
    }

    /** Frees the device state. */
    @Override
    public void close() {
        manager.close();
    }
}
