package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.AmpException;
import io.github.djlamp.amp.scale.LossScaleCollapsedException;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.spi.AmpBackend;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tells divergence from overflow for one attached trainer, at the host reads of the loss scaler's
 * state: a fixed scale that overflows {@value AmpSession#FIXED_SCALE_OVERFLOW_LIMIT} steps in a row
 * stops training, and a collapsed scale is told apart from a loss that is itself Inf/NaN.
 *
 * <p>Whether a loss was non-finite since the last read is kept on the device (no host read per
 * step).
 */
final class DivergenceChecks implements AutoCloseable {

    private static final Logger logger = LoggerFactory.getLogger(DivergenceChecks.class);

    private final LossScaling scaling;
    private final LossScaler scaler;
    private final AmpBackend backend;
    private final NDManager manager;
    private final NDArray lossHealth;

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
     * Completes a collapse the scaler found with whether the loss itself was non-finite: the scaler
     * sees only the losses still alive, the loss health every step since the last read.
     */
    LossScaleCollapsedException diagnose(LossScaleCollapsedException e) {
        if (!e.isLossNonFinite() && lossWasNonFinite()) {
            return new LossScaleCollapsedException(
                    scaling.getMinScale(), e.getNonFiniteParameters(), true);
        }
        return e;
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
