package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.cast.internal.BufferSnapshot;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.scale.GradientSet;
import io.github.djlamp.amp.scale.LossScaleCollapsedException;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.train.StepVerdict.Verdict;

/**
 * What attaching a trainer decides, fixed until the next trainer is attached, and the work of a
 * step on it: the engine layer, the policy resolved for the trainer's first device, the loss
 * scaling, whether optimizer steps are fused, and what follows: the loss scaler (its state on the
 * device when the steps are fused), the divergence checks, and the snapshots of running statistics
 * that a skipped step puts back. Every host read of the scaler's state is followed by the
 * divergence checks and the state saved with the model.
 *
 * @param trainer the trainer
 * @param backend the engine layer of the trainer's manager
 * @param policy the concrete policy ("auto" resolved)
 * @param policyChoice the policy and, when "auto" chose it, why
 * @param scaling the loss scaling in use
 * @param fused whether optimizer steps are fused and skip on the device
 * @param scaler the loss scaler, its state on the trainer's first device
 * @param hostSyncInterval steps between host reads of the scaler's state when it is on the device
 * @param divergence the divergence checks of this trainer's steps
 * @param buffers the running statistics' snapshots under loss scaling, else null
 * @param persistence where the scaler state is saved with the model
 */
record AttachedTrainer(
        Trainer trainer,
        AmpBackend backend,
        PrecisionPolicy policy,
        String policyChoice,
        LossScaling scaling,
        boolean fused,
        LossScaler scaler,
        int hostSyncInterval,
        DivergenceChecks divergence,
        BufferSnapshot buffers,
        SessionPersistence persistence)
        implements AutoCloseable {

    /** The name djl-amp gives the losses it scaled, to refuse scaling them twice. */
    static final String SCALED_LOSS_NAME = "djl-amp scaled loss";

    /**
     * Decides everything for {@code trainer}, whose model block is {@code block}, and restores the
     * scaler state saved with its model.
     */
    static AttachedTrainer bind(
            Trainer trainer,
            MixedPrecisionBlock block,
            SessionSettings settings,
            LossScalingOptimizer optimizer,
            SessionPersistence persistence) {
        Device[] devices = trainer.getDevices();
        Device device = devices[0];
        NDManager manager = trainer.getManager();
        AmpBackend backend = AmpBackends.forManager(manager);
        PrecisionPolicy policy = block.resolvePolicy(device, manager);
        String choice =
                block.getPolicy().isAuto()
                        ? policy
                                + " (auto on "
                                + device
                                + ": "
                                + block.describePolicyChoice(device, manager)
                                + ")"
                        : policy.toString();
        LossScaling scaling = settings.lossScalingFor(policy.getComputePrecision());
        boolean fused = FusedStepPlan.fusesSteps(settings, devices, optimizer);
        int interval = settings.getHostSyncInterval(devices);
        LossScaler scaler =
                FusedStepPlan.newScaler(fused, scaling, backend, manager, device, interval);
        AttachedTrainer attached =
                new AttachedTrainer(
                        trainer,
                        backend,
                        policy,
                        choice,
                        scaling,
                        fused,
                        scaler,
                        interval,
                        new DivergenceChecks(scaling, scaler, backend, interval, manager, device),
                        scaling.isEnabled()
                                ? block.getTrainingLink().enableBufferSnapshots()
                                : null,
                        persistence);
        persistence.attach(trainer.getModel(), scaler, scaling);
        return attached;
    }

    /** Whether the loss is scaled and the gradients checked. */
    boolean isScaling() {
        return scaling.isEnabled();
    }

    /**
     * The loss for backward: its value the loss's, its gradient the scale's. Remembers on the
     * device whether the loss was finite (no host read).
     */
    NDArray scale(NDArray loss) {
        // value: the true loss; gradient: the scale (the difference is 0 in value, 1 in gradient)
        NDArray detached = loss.stopGradient();
        NDArray scaled = scaler.scale(loss.sub(detached)).add(detached);
        scaled.setName(SCALED_LOSS_NAME);
        divergence.recordLoss(detached);
        return scaled;
    }

    /**
     * Unscales and checks the step's gradients, and puts back the running statistics the forward
     * pass moved where the step is skipped (decided on the device when the verdict stays there).
     *
     * @return the step's verdict: APPLY, SKIP, or ON_DEVICE between host reads
     */
    Verdict check(GradientSet gradients, NDManager stepManager) {
        boolean overflow = scaler.unscaleAndCheck(gradients, stepManager);
        divergence.gradientsChecked(gradients, overflow);
        if (buffers != null) {
            if (!scaler.isVerdictKnown()) {
                buffers.restoreIf(backend, scaler.getFoundInfArray());
            } else if (overflow) {
                buffers.restore(backend);
            }
            buffers.clear();
        }
        if (!scaler.isVerdictKnown()) {
            return Verdict.ON_DEVICE;
        }
        return overflow ? Verdict.SKIP : Verdict.APPLY;
    }

    /** Reads a verdict left on the device: one host read. */
    Verdict readVerdict() {
        boolean overflow = backend.readFloat(scaler.getFoundInfArray()) != 0f;
        if (overflow) {
            divergence.overflowSeen();
        }
        return overflow ? Verdict.SKIP : Verdict.APPLY;
    }

    /** Moves the scale after the step; at a host read, checks for divergence and saves. */
    void update() {
        try {
            scaler.update();
        } catch (LossScaleCollapsedException e) {
            throw divergence.diagnose(e);
        }
        afterHostRead();
    }

    /** Reads a state kept on the device now; checks for divergence and saves. */
    void syncToHost() {
        try {
            scaler.syncToHost();
        } catch (LossScaleCollapsedException e) {
            throw divergence.diagnose(e);
        }
        afterHostRead();
    }

    /**
     * The run's last read of a state kept on the device (one host read), saved with the model so
     * that the model saved after training, or given to the next trainer, has the current state.
     *
     * @return the divergence found since the last read, or null
     */
    RuntimeException lastRead() {
        RuntimeException found = null;
        if (!scaler.isMirrorFresh()) {
            try {
                syncToHost();
            } catch (RuntimeException e) {
                found = e;
            }
        }
        if (isScaling()) {
            // saved even when fresh: a read the user asked for (state(), getScale()) saves nothing
            persistence.saveScalerState();
        }
        return found;
    }

    private void afterHostRead() {
        if (isScaling() && scaler.isMirrorFresh()) {
            divergence.afterHostRead();
            persistence.saveScalerState();
        }
    }

    /** Frees the scaler's and the divergence checks' device state. */
    @Override
    public void close() {
        scaler.close();
        divergence.close();
    }
}
