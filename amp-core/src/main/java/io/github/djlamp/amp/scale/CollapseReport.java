package io.github.djlamp.amp.scale;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.ArrayList;
import java.util.List;

/**
 * Builds the {@link LossScaleCollapsedException} of a loss scaler: predicts the collapse when an
 * overflow is found, naming the parameters whose gradients are non-finite before the optimizer step
 * clears them, and tells overflow from divergence by the step's losses, which it remembers.
 */
final class CollapseReport {

    private static final int NAMES_IN_REPORTS = 5;

    private final AmpBackend backend;
    private final float minScale;
    private final List<NDArray> lossesThisStep = new ArrayList<>();
    private long hostReads;

    CollapseReport(AmpBackend backend, float minScale) {
        this.backend = backend;
        this.minScale = minScale;
    }

    /** Remembers a loss of this step, for the divergence diagnosis. */
    void addLoss(NDArray loss) {
        lossesThisStep.add(loss);
    }

    /** Forgets the step's losses at its end. */
    void endStep() {
        lossesThisStep.clear();
    }

    /**
     * Returns the collapse this step's verdict leads to, or null: named now, because the optimizer
     * step that follows clears the gradients. Reads the gradients and losses on the host, on
     * collapse only.
     *
     * @param overflow the step's verdict
     * @param mirror the state before the step's update
     * @param gradients the step's gradients, or null when they are no longer known
     */
    LossScaleCollapsedException predict(
            boolean overflow, HostScaleMirror mirror, GradientSet gradients) {
        if (!overflow || !mirror.backoffWouldCollapse()) {
            return null;
        }
        return new LossScaleCollapsedException(
                minScale,
                gradients == null ? List.of() : gradients.nonFinite(NAMES_IN_REPORTS),
                anyLossNonFinite());
    }

    /**
     * Returns a collapse that the device state showed at a periodic read: the collapsing step's
     * gradients are gone, so the gradients checked in the step of the read are named, if any.
     *
     * @param checkedThisStep the gradients of the reading step, or null between steps
     */
    LossScaleCollapsedException foundLate(GradientSet checkedThisStep) {
        return new LossScaleCollapsedException(
                minScale,
                checkedThisStep == null ? List.of() : checkedThisStep.nonFinite(NAMES_IN_REPORTS),
                false);
    }

    /** The host reads the loss diagnosis made. */
    long getHostReads() {
        return hostReads;
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
}
