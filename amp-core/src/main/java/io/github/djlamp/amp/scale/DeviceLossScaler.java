package io.github.djlamp.amp.scale;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.DynamicScaleSettings;
import java.util.List;

/**
 * A loss scaler whose whole state stays on the device, for optimizer steps that skip on the device:
 * the verdict and the state are read on the host every {@code hostSyncInterval} steps, or when a
 * getter asks for a value the host mirror no longer holds. Between reads, a collapse or a fixed
 * scale's run of overflows is counted on the device and thrown after the read that finds it.
 */
final class DeviceLossScaler implements LossScaler {

    private final LossScaling config;
    private final AmpBackend backend;
    private final NDManager manager;
    private final DynamicScaleSettings settings;
    private final int hostSyncInterval;
    private final StepPhase phase = new StepPhase();
    private final HostScaleMirror mirror;
    private final CollapseReport report;
    private DeviceScalerState device;
    private NDArray foundInf;
    private boolean overflow;
    private LossScaleCollapsedException collapse;
    private LossScaleCollapsedException lateCollapse;
    private GradientSet checked;
    private int stepsSinceRead;
    private long stepsAtCapture = -1;
    private int stepsSinceReadAtCapture;
    private boolean readsDeferred;
    private boolean mirrorFresh = true;
    private boolean verdictKnown = true;
    private long stateReads;

    DeviceLossScaler(
            LossScaling config,
            AmpBackend backend,
            NDManager parent,
            Device device,
            int hostSyncInterval) {
        this.config = config;
        this.backend = backend;
        this.manager = parent.newSubManager(device);
        this.manager.setName("djl-amp loss scaler");
        this.settings =
                new DynamicScaleSettings(
                        config.getGrowthFactor(),
                        config.getBackoffFactor(),
                        config.getGrowthInterval(),
                        config.getHysteresis(),
                        config.getMinScale(),
                        config.getMaxScale());
        this.hostSyncInterval = hostSyncInterval;
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
        refreshMirror();
        return mirror.getScale();
    }

    /** {@inheritDoc} */
    @Override
    public NDArray getScaleArray() {
        return device.scale();
    }

    /** {@inheritDoc} */
    @Override
    public NDArray getFoundInfArray() {
        return foundInf;
    }

    /** {@inheritDoc} */
    @Override
    public void deviceStateArrays(List<? super NDArray> into) {
        into.add(foundInf);
        device.arrays(into);
    }

    /** {@inheritDoc} */
    @Override
    public int getGrowthTracker() {
        refreshMirror();
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
        refreshMirror();
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
        if (!verdictKnown) {
            readDevice(); // asked for: one host read
        }
        return overflow;
    }

    /** {@inheritDoc} */
    @Override
    public boolean isStateOnDevice() {
        return true;
    }

    /** {@inheritDoc} */
    @Override
    public boolean isMirrorFresh() {
        return mirrorFresh;
    }

    /** {@inheritDoc} */
    @Override
    public boolean isVerdictKnown() {
        return verdictKnown;
    }

    /** {@inheritDoc} */
    @Override
    public long getHostReads() {
        return stateReads + report.getHostReads();
    }

    /** {@inheritDoc} */
    @Override
    public int takeLongestOverflowRun() {
        return mirror.takeLongestOverflowRun();
    }

    /** {@inheritDoc} */
    @Override
    public void syncToHost() {
        refreshMirror();
        if (!phase.isUnscaled()) {
            throwLateCollapse();
        }
    }

    /** {@inheritDoc} */
    @Override
    public void resetOverflowRun() {
        mirror.resetOverflowRun();
        device.resetOverflowRun(backend);
    }

    private void refreshMirror() {
        if (!mirrorFresh || (phase.isUnscaled() && !verdictKnown)) {
            readDevice();
        }
    }

    /** {@inheritDoc} */
    @Override
    public NDArray scale(NDArray loss) {
        backend.requireDjlSafe(loss, "backward");
        phase.requireScalable();
        report.addLoss(loss);
        // the scale is a device value, as in GradScaler.scale
        return loss.mul(device.scale());
    }

    /** {@inheritDoc} */
    @Override
    public boolean unscaleAndCheck(GradientSet gradients, NDManager stepManager) {
        phase.startCheck();
        collapse = null;
        overflow = false;
        verdictKnown = true;
        // cleared even with nothing to check: the device update reads this step's flag
        backend.zero(new NDList(foundInf));
        if (gradients.isEmpty()) {
            return false;
        }
        NDArray inverse = device.inverseScale(stepManager);
        GradientUnscaler.unscaleAndCheck(backend, gradients, inverse, foundInf, stepManager);
        checked = gradients;
        verdictKnown = false;
        stepsSinceRead++;
        if (readsDeferred || stepsSinceRead < hostSyncInterval) {
            return false; // decided on the device; nothing read
        }
        // only the scheduled read restarts the schedule: reads a user asks for between steps
        // (getScale, state) must not put off the divergence checks that run at the scheduled ones
        stepsSinceRead = 0;
        readDevice();
        return overflow;
    }

    /**
     * One host read of the device state (and of this step's verdict, between the check and the
     * update): refreshes the mirror and notes collapses and overflow runs since the last read.
     */
    private void readDevice() {
        DeviceScalerState.Reading reading = device.read(backend, foundInf);
        stateReads++;
        mirror.load(reading);
        mirrorFresh = true;
        if (reading.collapsed() && lateCollapse == null) {
            lateCollapse = report.foundLate(phase.isUnscaled() ? checked : null);
        }
        if (phase.isUnscaled() && !verdictKnown) {
            overflow = reading.foundInf();
            verdictKnown = true;
            collapse = report.predict(overflow, mirror, checked);
        }
    }

    /** {@inheritDoc} */
    @Override
    public void update() {
        phase.requireChecked();
        try {
            mirror.countStep();
            if (config.getMode() == LossScaling.Mode.DYNAMIC) {
                // a known verdict predicts the collapse on the host instead
                device.updateDynamic(backend, foundInf, settings, !verdictKnown);
            } else {
                device.updateFixed(backend, foundInf);
            }
            if (!verdictKnown) {
                mirrorFresh = false;
            } else {
                // the device state is updated: the mirror follows by the same arithmetic
                mirror.advance(overflow, collapse, HostScaleMirror.ScaleKernel.NONE);
            }
            throwLateCollapse();
        } finally {
            phase.endStep();
            report.endStep();
            collapse = null;
            checked = null;
            verdictKnown = true;
        }
    }

    @Override
    public void deferScheduledReads(boolean deferred) {
        readsDeferred = deferred;
    }

    @Override
    public boolean takeDueRead() {
        if (stepsSinceRead < hostSyncInterval) {
            return false;
        }
        stepsSinceRead = 0;
        return true;
    }

    @Override
    public void countReplayedStep() {
        phase.requireBetweenSteps("a replayed step");
        stepsSinceRead++;
        mirror.countStep();
        mirrorFresh = false; // the replay moved the state on the device (unknown verdict)
    }

    @Override
    public void beginCapturedStep() {
        phase.requireBetweenSteps("a captured step");
        stepsAtCapture = mirror.getSteps();
        stepsSinceReadAtCapture = stepsSinceRead;
    }

    @Override
    public void abandonStep() {
        phase.endStep();
        report.endStep();
        collapse = null;
        checked = null;
        overflow = false;
        verdictKnown = true;
        if (stepsAtCapture >= 0) {
            mirror.rewindSteps(stepsAtCapture);
            stepsSinceRead = stepsSinceReadAtCapture;
            stepsAtCapture = -1;
        }
    }

    private void throwLateCollapse() {
        LossScaleCollapsedException late = lateCollapse;
        lateCollapse = null;
        if (late != null && config.getMode() == LossScaling.Mode.DYNAMIC) {
            throw late;
        }
    }

    /** {@inheritDoc} */
    @Override
    public ScalerState state() {
        refreshMirror();
        return mirror.state();
    }

    /** {@inheritDoc} */
    @Override
    public void restore(ScalerState state) {
        phase.requireBetweenSteps("restore(...)");
        NDArray newFound = manager.zeros(new Shape(), DataType.FLOAT32);
        if (foundInf != null) {
            foundInf.close();
        }
        foundInf = newFound;
        mirror.restore(state);
        lateCollapse = null;
        mirrorFresh = true;
        stepsSinceRead = 0;
        DeviceScalerState fresh = new DeviceScalerState(state, manager, foundInf.getDevice());
        if (device != null) {
            device.close();
        }
        device = fresh;
    }

    /** {@inheritDoc} */
    @Override
    public void close() {
        manager.close();
    }
}
