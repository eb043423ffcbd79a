package io.github.djlamp.amp.scale;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.AmpException;
import io.github.djlamp.amp.spi.AmpBackend;
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
 *       every device's gradients, one host read of the verdict; {@link #isStepSkipped()} then says
 *       whether the optimizer must skip this step;
 *   <li>{@link #update()}: the scale update (back off on overflow, grow after a run of clean
 *       steps), on the device through {@code _amp_update_scale_}.
 * </ol>
 *
 * <p>The scale and growth tracker live on the device; a host mirror, advanced from the same verdict
 * by the same arithmetic, serves reports and decisions without further device reads. Not
 * thread-safe: one scaler per trainer.
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
        return config.isEnabled() ? hostScale : 1f;
    }

    /**
     * Returns the device copy of the scale, a 0-dimensional FP32 array owned by the scaler.
     *
     * @return the scale on the scaler's device
     */
    public NDArray getScaleArray() {
        return scaleTensor;
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
        return overflow;
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
                    "scale(loss) after unscaleAndCheck(...) in the same step: finish the step with"
                            + " update() first, or accumulate every micro-batch's backward before"
                            + " unscaleAndCheck(...)");
        }
        if (!config.isEnabled()) {
            return loss;
        }
        lossesThisStep.add(loss);
        return loss.mul(hostScale);
    }

    /**
     * Unscales every gradient in place by 1/scale and checks them all for Inf/NaN with PyTorch's
     * fused kernel, one call per device, then reads the merged verdict once.
     *
     * @param gradients every device's gradients of this step
     * @param stepManager a manager closed at the end of the step, for per-step arrays
     * @return true when the step must be skipped
     * @throws AmpException when called twice in one step
     */
    public boolean unscaleAndCheck(GradientSet gradients, NDManager stepManager) {
        if (phase != Phase.READY) {
            throw new AmpException(
                    "unscaleAndCheck(...) was already called for this step; step (or skip) the"
                            + " optimizer, then call update() before the next step");
        }
        phase = Phase.UNSCALED;
        collapse = null;
        if (!config.isEnabled() || gradients.isEmpty()) {
            overflow = false;
            return false;
        }
        backend.zero(new NDList(foundInf));
        float inverse = (float) (1.0 / hostScale);
        boolean first = true;
        for (NDList group : gradients.byReplica().values()) {
            Device device = group.get(0).getDevice();
            NDArray inv = stepManager.create(inverse).toDevice(device, false);
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
        overflow = backend.readFloat(foundInf) != 0f;
        if (overflow && backoffWouldCollapse()) {
            // named now: the optimizer step that follows clears these gradients
            collapse =
                    new LossScaleCollapsedException(
                            config.getMinScale(),
                            gradients.nonFinite(NAMES_IN_REPORTS),
                            anyLossNonFinite());
        }
        return overflow;
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
            if (config.getMode() == LossScaling.Mode.DYNAMIC) {
                updateDynamic();
            } else if (overflow) {
                skippedSteps++;
            }
        } finally {
            phase = Phase.READY;
            lossesThisStep.clear();
            collapse = null;
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
    }

    /** Frees the device state. */
    @Override
    public void close() {
        manager.close();
    }
}
