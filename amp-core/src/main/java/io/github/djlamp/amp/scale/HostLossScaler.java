package io.github.djlamp.amp.scale;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.List;

/**
 * A loss scaler that reads each step's verdict on the host (one read per step): the scale and
 * growth tracker are updated on the device by GradScaler's kernel, and mirrored on the host.
 */
final class HostLossScaler implements LossScaler {

    private final LossScaling config;
    private final AmpBackend backend;
    private final NDManager manager;
    private final StepPhase phase = new StepPhase();
    private final HostScaleMirror mirror;
    private final CollapseReport report;
    private NDArray scaleTensor;
    private NDArray growthTracker;
    private NDArray foundInf;
    private boolean overflow;
    private LossScaleCollapsedException collapse;
    private long verdictReads;
    private long stepsAtCapture = -1;

    HostLossScaler(LossScaling config, AmpBackend backend, NDManager parent, Device device) {
        this.config = config;
        this.backend = backend;
        this.manager = parent.newSubManager(device);
        this.manager.setName("djl-amp loss scaler");
        this.mirror = new HostScaleMirror(config);
        this.report = new CollapseReport(backend, config.getMinScale());
        restore(new ScalerState(config.getInitScale(), 0, 0, 0, 0));
    }

    /** {@inheritDoc} */
    @Override
    public LossScaling getConfig() {
        return config;
    }

    /** {@inheritDoc} */
    @Override
    public float getScale() {
        return config.isEnabled() ? mirror.getScale() : 1f;
    }

    /** {@inheritDoc} */
    @Override
    public NDArray getScaleArray() {
        return scaleTensor;
    }

    /** {@inheritDoc} */
    @Override
    public NDArray getFoundInfArray() {
        return foundInf;
    }

    /** {@inheritDoc} The state is on the host: only the flag. */
    @Override
    public void deviceStateArrays(List<? super NDArray> into) {
        into.add(foundInf);
    }

    /** {@inheritDoc} */
    @Override
    public int getGrowthTracker() {
        return mirror.getGrowthTracker();
    }

    /** {@inheritDoc} */
    @Override
    public long getSteps() {
        return mirror.getSteps();
    }

    /** {@inheritDoc} */
    @Override
    public long getSkippedSteps() {
        return mirror.getSkippedSteps();
    }

    /** {@inheritDoc} */
    @Override
    public Phase getPhase() {
        return phase.get();
    }

    /** {@inheritDoc} */
    @Override
    public boolean isStepSkipped() {
        phase.requireVerdict();
        return overflow;
    }

    /** {@inheritDoc} */
    @Override
    public boolean isStateOnDevice() {
        return false;
    }

    /** {@inheritDoc} */
    @Override
    public boolean isMirrorFresh() {
        return true;
    }

    /** {@inheritDoc} */
    @Override
    public boolean isVerdictKnown() {
        return true;
    }

    /** {@inheritDoc} */
    @Override
    public long getHostReads() {
        return verdictReads + report.getHostReads();
    }

    /** {@inheritDoc} */
    @Override
    public int takeLongestOverflowRun() {
        return mirror.takeLongestOverflowRun();
    }

    /** {@inheritDoc} */
    @Override
    public void syncToHost() {
        // the mirror is current after every step
    }

    /** {@inheritDoc} */
    @Override
    public void resetOverflowRun() {
        mirror.resetOverflowRun();
    }

    /** {@inheritDoc} */
    @Override
    public NDArray scale(NDArray loss) {
        backend.requireDjlSafe(loss, "backward");
        phase.requireScalable();
        if (!config.isEnabled()) {
            return loss;
        }
        report.addLoss(loss);
        // an array that lives until backward has read it: DJL's mul(Number) makes the number an
        // array over a Java buffer and drops it at once, while autograd keeps it for backward,
        // and on the CPU a garbage collection in between frees that memory (README, "DJL defects
        // djl-amp cannot fix"); the scale on the loss's own manager where it is on another device
        NDArray scale =
                scaleTensor.getDevice().equals(loss.getDevice())
                        ? scaleTensor
                        : loss.getManager().create(mirror.getScale());
        return loss.mul(scale);
    }

    /** {@inheritDoc} */
    @Override
    public boolean unscaleAndCheck(GradientSet gradients, NDManager stepManager) {
        phase.startCheck();
        collapse = null;
        overflow = false;
        if (!config.isEnabled()) {
            return false;
        }
        // cleared even with nothing to check: the update reads this step's flag
        backend.zero(new NDList(foundInf));
        if (gradients.isEmpty()) {
            return false;
        }
        NDArray inverse = stepManager.create((float) (1.0 / mirror.getScale()));
        GradientUnscaler.unscaleAndCheck(backend, gradients, inverse, foundInf, stepManager);
        verdictReads++;
        overflow = backend.readFloat(foundInf) != 0f;
        collapse = report.predict(overflow, mirror, gradients);
        return overflow;
    }

    /** {@inheritDoc} */
    @Override
    public void update() {
        phase.requireChecked();
        try {
            mirror.countStep();
            mirror.advance(overflow, collapse, this::runKernel);
        } finally {
            phase.endStep();
            report.endStep();
            collapse = null;
        }
    }

    /** {@inheritDoc} Every verdict is read in its step here: nothing to defer. */
    @Override
    public void deferScheduledReads(boolean deferred) {}

    @Override
    public boolean takeDueRead() {
        return false;
    }

    /**
     * {@inheritDoc} With scaling off only the step count follows; a scale kept on the host is read
     * every step, which no replay can do.
     */
    @Override
    public void countReplayedStep() {
        if (config.isEnabled()) {
            throw new IllegalStateException(
                    "a step replayed with the loss scale on the host: captured steps need the"
                            + " state on the device (fused optimizer steps)");
        }
        phase.requireBetweenSteps("a replayed step");
        mirror.countStep();
    }

    @Override
    public void beginCapturedStep() {
        phase.requireBetweenSteps("a captured step");
        stepsAtCapture = mirror.getSteps();
    }

    @Override
    public void abandonStep() {
        phase.endStep();
        report.endStep();
        collapse = null;
        overflow = false;
        if (stepsAtCapture >= 0) {
            mirror.rewindSteps(stepsAtCapture);
            stepsAtCapture = -1;
        }
    }

    private void runKernel(double growth, double backoff) {
        backend.updateScale(
                scaleTensor, growthTracker, foundInf, growth, backoff, config.getGrowthInterval());
    }

    /** {@inheritDoc} */
    @Override
    public ScalerState state() {
        return mirror.state();
    }

    /** {@inheritDoc} */
    @Override
    public void restore(ScalerState state) {
        phase.requireBetweenSteps("restore(...)");
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
        mirror.restore(state);
    }

    /** {@inheritDoc} */
    @Override
    public void close() {
        manager.close();
    }
}
