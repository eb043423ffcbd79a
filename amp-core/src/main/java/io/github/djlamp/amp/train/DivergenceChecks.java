package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.scale.GradientSet;
import io.github.djlamp.amp.scale.LossScaleCollapsedException;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tells divergence from overflow for one attached trainer, at the host reads of the loss scaler's
 * state: a fixed scale that overflows {@value AmpSession#FIXED_SCALE_OVERFLOW_LIMIT} steps in a row
 * stops training, and a collapsed scale is told apart from a loss that is itself Inf/NaN.
 *
 * <p>Whether a loss was non-finite since the last read is kept on the device (no host read per
 * step). With the state on the device (fused steps) a collapse can be found at a read whose
 * gradients are gone (the epoch's end, the trainer's close): the parameters with non-finite
 * gradients are then those seen at the last host-read step that overflowed, recorded at that step.
 * Recording costs one more read on an overflowing host-read step, and nothing on any other step.
 */
final class DivergenceChecks implements AutoCloseable {

    private static final Logger logger = LoggerFactory.getLogger(DivergenceChecks.class);
    private static final int NAMES_IN_REPORTS = 5;

    private final LossScaling scaling;
    private final LossScaler scaler;
    private final AmpBackend backend;
    private final int hostSyncInterval;
    private final NDManager manager;
    private final NDArray lossHealth;
    private GradientSet checkedThisStep;
    private long checkedAtStep;
    private List<String> overflowNames = List.of();
    private long overflowStep = -1;

    /**
     * Watches a trainer's steps; the loss health lives on a sub-manager of {@code parent}, on
     * {@code device}, when {@code scaling} is enabled.
     */
    DivergenceChecks(
            LossScaling scaling,
            LossScaler scaler,
            AmpBackend backend,
            int hostSyncInterval,
            NDManager parent,
            Device device) {
        this.scaling = scaling;
        this.scaler = scaler;
        this.backend = backend;
        this.hostSyncInterval = hostSyncInterval;
        if (scaling.isEnabled()) {
            manager = parent.newSubManager(device);
            manager.setName("djl-amp session");
            lossHealth = manager.zeros(new Shape());
        } else {
            manager = null;
            lossHealth = null;
        }
    }

    /** Adds a loss of this step to the loss health on the device: no host read. */
    void recordLoss(NDArray detachedLoss) {
        // x - x is 0 for a finite loss and NaN otherwise
        NDArray health = detachedLoss.sub(detachedLoss).sum().toType(DataType.FLOAT32, false);
        lossHealth.addi(health.toDevice(lossHealth.getDevice(), false));
    }

    /**
     * Notes the step's checked gradients (alive until the step's manager closes), and names the
     * non-finite ones when the check itself read an overflow on the host.
     */
    void gradientsChecked(GradientSet gradients, boolean overflow) {
        checkedThisStep = gradients;
        checkedAtStep = scaler.getSteps() + 1;
        if (overflow) {
            overflowSeen();
        }
    }

    /**
     * A host read found this step's gradients overflowed: with the state on the device, their names
     * are recorded now, before the optimizer step clears them (one read).
     */
    void overflowSeen() {
        if (!scaler.isStateOnDevice() || checkedThisStep == null) {
            return; // read every step: a collapse is named at its own step
        }
        List<String> names = checkedThisStep.nonFinite(NAMES_IN_REPORTS);
        if (!names.isEmpty()) {
            overflowNames = names;
            overflowStep = checkedAtStep;
        }
    }

    /**
     * At a host read of the state: stops a fixed scale overflowing step after step, and starts the
     * loss health again.
     *
     * @throws AmpException when a fixed scale overflowed on {@value
     *     AmpSession#FIXED_SCALE_OVERFLOW_LIMIT} steps in a row since the last read
     */
    void afterHostRead() {
        if (scaling.getMode() == LossScaling.Mode.STATIC
                && scaler.takeLongestOverflowRun() >= AmpSession.FIXED_SCALE_OVERFLOW_LIMIT) {
            AmpException failure = fixedScaleFailure(lossWasNonFinite());
            scaler.resetOverflowRun();
            zeroLossHealth();
            throw failure;
        }
        zeroLossHealth();
    }

    /**
     * Completes a collapse the scaler found: whether the loss itself was non-finite (the scaler
     * sees only the losses still alive; the loss health covers every step since the last read),
     * and, when its gradients were gone, the parameters seen at the last overflowing read or how to
     * have them named.
     */
    LossScaleCollapsedException diagnose(LossScaleCollapsedException e) {
        boolean lossNonFinite = e.isLossNonFinite() || lossWasNonFinite();
        if (!e.getNonFiniteParameters().isEmpty() || !scaler.isStateOnDevice()) {
            return lossNonFinite == e.isLossNonFinite()
                    ? e
                    : new LossScaleCollapsedException(
                            scaling.getMinScale(), e.getNonFiniteParameters(), true);
        }
        String foundAt =
                "the collapse came between host reads and was found after step "
                        + scaler.getSteps();
        if (overflowStep >= 0) {
            String where =
                    "gradients were non-finite in "
                            + String.join(", ", overflowNames)
                            + " at step "
                            + overflowStep
                            + ", the last host read that saw an overflow ("
                            + foundAt
                            + ")";
            return new LossScaleCollapsedException(
                    scaling.getMinScale(), overflowNames, lossNonFinite, where);
        }
        String where =
                "no host read saw the overflowing steps' gradients ("
                        + foundAt
                        + "; the scaler state on the device is read every "
                        + hostSyncInterval
                        + " steps): to name the parameters, read it every step with"
                        + " AmpOptions.builder().hostSyncInterval(1), or use DJL's own update"
                        + " with .fusedOptimizer(FusedOptimizer.OFF)";
        return new LossScaleCollapsedException(
                scaling.getMinScale(), List.of(), lossNonFinite, where);
    }

    /**
     * Throws a divergence found at the trainer's close, if any. DJL's {@code Trainer.close} stops
     * at a listener that throws, so what it would still have done is done first: the parameters
     * synced and the trainer's arrays freed (listeners after djl-amp's do not run: it diverged).
     */
    static void throwAtClose(Trainer closing, ParameterStore store, RuntimeException divergence) {
        if (divergence == null) {
            return;
        }
        logger.error("djl-amp: found when the trainer closed: {}", divergence.getMessage());
        if (store != null) {
            store.sync();
        }
        closing.getManager().close();
        throw divergence;
    }

    private AmpException fixedScaleFailure(boolean lossNonFinite) {
        String what =
                "The fixed loss scale "
                        + scaling.getInitScale()
                        + " overflowed on "
                        + AmpSession.FIXED_SCALE_OVERFLOW_LIMIT
                        + " steps in a row, and every one of them was skipped: nothing trains. ";
        if (lossNonFinite) {
            return new AmpException(
                    what
                            + "The loss itself is Inf/NaN, so no scale can help: check the data"
                            + " for NaNs, lower the learning rate, or run in fp32 to confirm.");
        }
        return new AmpException(
                what
                        + "Use a smaller fixed scale (LossScaling.fixed(s)), or"
                        + " LossScaling.dynamic(), which finds one by itself.");
    }

    private boolean lossWasNonFinite() {
        return lossHealth != null && !Float.isFinite(backend.readFloat(lossHealth));
    }

    private void zeroLossHealth() {
        backend.zero(new NDList(lossHealth));
    }

    /** Frees the loss health. */
    @Override
    public void close() {
        if (manager != null) {
            manager.close();
        }
    }
}
