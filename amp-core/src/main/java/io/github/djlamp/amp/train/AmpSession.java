package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.listener.TrainingListener;
import ai.djl.util.Pair;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.cast.internal.BufferSnapshot;
import io.github.djlamp.amp.cast.internal.WeightCastCache;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.scale.GradientSet;
import io.github.djlamp.amp.scale.LossScaleCollapsedException;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.scale.ScalerState;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The mixed precision state of one trainer, and the verb API for custom training loops.
 *
 * <p>With {@code EasyTrain}, {@link io.github.djlamp.amp.Amp#configure} wires it in and nothing
 * here needs calling. In a custom loop:
 *
 * <pre>{@code
 * AmpSession amp = AmpSession.of(trainer);
 * try (GradientCollector collector = trainer.newGradientCollector()) {
 *     NDArray loss = trainer.getLoss().evaluate(labels, trainer.forward(data)); // scaled for backward
 *     collector.backward(loss);  // its value is the true loss: log it as it is
 * }
 * amp.step(); // unscale and check, trainer.step() (skipped on overflow), move the scale
 * }</pre>
 *
 * <p>To clip gradients, call {@link #unscaleGradients()} first and clip between it and {@link
 * #step()}. Under bf16 (no loss scaling) nothing here is needed: {@code trainer.step()} works as in
 * plain DJL.
 */
public final class AmpSession implements AutoCloseable {

    /** The model property the scaler state is saved under. */
    public static final String SCALER_STATE_PROPERTY = "djl-amp.scaler";

    /**
     * A fixed loss scale that overflows on this many steps in a row stops training: every one of
     * them was skipped, so nothing trains.
     */
    public static final int FIXED_SCALE_OVERFLOW_LIMIT = 8;

    /** The name djl-amp gives the losses it scaled, to refuse scaling them twice. */
    static final String SCALED_LOSS_NAME = "djl-amp scaled loss";

    private static final Logger logger = LoggerFactory.getLogger(AmpSession.class);

    private final MixedPrecisionBlock block;
    private final AmpOptions options;
    private int pendingBatches;
    private Trainer trainer;
    private boolean trainerClosed;
    private AmpBackend backend;
    private LossScaler scaler;
    private LossScaling scaling;
    private BufferSnapshot buffers;
    private List<Pair<String, Parameter>> parameters;
    private boolean[] trainableFlags;
    private int parametersTreeVersion;
    private List<Pair<String, Parameter>> trainable;
    private PrecisionPolicy policy;
    private String policyChoice;
    private NDManager sessionManager;
    private NDArray lossHealth;
    private LossScalingOptimizer optimizer;
    private boolean fusedOptimizer;
    private boolean scaledThisStep;
    private GradientReducer gradientReducer;
    private Verdict verdict = Verdict.UNCHECKED;

    /** The training forward pass the verdict belongs to: a later forward makes it stale. */
    private long verdictForward = -1;

    /** A custom loop unscaled the gradients itself: the verdict holds until its amp.step(). */
    private boolean heldForStep;

    /** The training forward count when an optimizer state was last loaded, -1 for never. */
    private long optimizerStateLoadedAt = -1;

    /**
     * Records the verdict of the gradients of the current training forward pass. Evaluating the
     * loss again (a listener recording it) does not change it; the next training forward does.
     */
    private void decide(Verdict decided) {
        verdict = decided;
        verdictForward = block.getTrainingLink().getTrainingForwardCount();
    }

    /** The verdict, or UNCHECKED once a training forward pass has run since it was decided. */
    private Verdict current() {
        if (verdict != Verdict.UNCHECKED
                && !heldForStep
                && block.getTrainingLink().getTrainingForwardCount() != verdictForward) {
            verdict = Verdict.UNCHECKED;
        }
        return verdict;
    }

    private enum Verdict {
        UNCHECKED,
        APPLY,
        SKIP,
        /** Checked, with the verdict left on the device (read only if someone asks). */
        ON_DEVICE,
        ACCUMULATE
    }

    /**
     * Creates a session for a wrapped block.
     *
     * @param block the wrapped block being trained
     * @param options loss scaling and gradient accumulation
     */
    public AmpSession(MixedPrecisionBlock block, AmpOptions options) {
        this.block = block;
        this.options = options;
    }

    /**
     * Returns the session of a trainer configured with {@link io.github.djlamp.amp.Amp#configure}.
     *
     * @param trainer the trainer
     * @return its session, attached to it
     * @throws AmpException when the trainer was not configured through Amp.configure
     */
    public static AmpSession of(Trainer trainer) {
        // Trainer does not expose its listeners; notifying them is the one way to meet them
        List<TrainingListener> listeners = new ArrayList<>();
        trainer.notifyListeners(listeners::add);
        for (TrainingListener listener : listeners) {
            if (listener instanceof AmpTrainingListener) {
                AmpSession session = ((AmpTrainingListener) listener).getSession();
                session.attach(trainer);
                return session;
            }
        }
        throw new AmpException(
                "This trainer was not configured for mixed precision: create it from"
                        + " Amp.configure(config, block)");
    }

    /**
     * Binds the session to a trainer: resolves the policy for the trainer's first device, creates
     * the loss scaler there, and restores scaler state saved with the model when it was reached
     * under the same loss scaling. Idempotent.
     *
     * @param trainer the trainer
     * @throws IllegalStateException when another trainer made from the same configuration is still
     *     open
     * @throws AmpException when the trainer's model block is not this session's block
     */
    public void attach(Trainer trainer) {
        if (this.trainer == trainer) {
            return;
        }
        if (this.trainer != null && !trainerClosed) {
            throw new IllegalStateException(
                    "This AmpTrainingConfig already drives an open trainer, and one configuration"
                            + " holds the mixed precision state (loss scale, skipped steps) of one"
                            + " trainer at a time: close the first trainer before creating the"
                            + " next, or give each trainer its own Amp.configure(config, block)");
        }
        if (trainer.getModel().getBlock() != block) {
            throw new AmpException(
                    "The trainer's model block is not the MixedPrecisionBlock this session was"
                            + " configured with: call model.setBlock(wrapped) before"
                            + " model.newTrainer(Amp.configure(config, wrapped))");
        }
        this.trainer = trainer;
        trainerClosed = false;
        pendingBatches = 0;
        verdict = Verdict.UNCHECKED;
        Device device = trainer.getDevices()[0];
        NDManager manager = trainer.getManager();
        backend = AmpBackends.forManager(manager);
        policy = block.resolvePolicy(device, manager);
        policyChoice = describePolicyChoice(device, manager);
        if (scaler != null) {
            scaler.close();
        }
        if (sessionManager != null) {
            sessionManager.close();
        }
        scaling = scalingFor(policy.getComputePrecision());
        Device[] devices = trainer.getDevices();
        boolean wantsFused =
                optimizer != null && options.getFusedOptimizer().wantsFusedSteps(devices);
        if (wantsFused && devices.length > 1) {
            logger.info(
                    "djl-amp keeps the per-parameter optimizer update (one host read per step):"
                            + " fused steps run on one device, the trainer has {}",
                    devices.length);
        }
        fusedOptimizer = wantsFused && devices.length == 1 && optimizer.planFusedSteps();
        // fused steps skip on the device: nothing needs the verdict on the host each step
        scaler =
                fusedOptimizer
                        ? LossScaler.onDevice(
                                scaling, backend, manager, device, options.getHostSyncInterval())
                        : LossScaler.onHost(scaling, backend, manager, device);
        buffers = scaling.isEnabled() ? block.getTrainingLink().enableBufferSnapshots() : null;
        lossHealth = null;
        if (scaling.isEnabled()) {
            sessionManager = manager.newSubManager(device);
            sessionManager.setName("djl-amp session");
            lossHealth = sessionManager.zeros(new Shape());
        } else {
            sessionManager = null;
        }
        restoreSavedState(trainer.getModel());
        block.getTrainingLink().setBeforeSave(this::saveCurrentState);
    }

    /**
     * Puts the current scaler state into the model's properties as {@code Model.save} begins (one
     * host read when the state lives on the device and was not read since the last step), so that a
     * checkpoint written between the periodic reads is current. Divergence is still reported at the
     * reads, not here.
     */
    private void saveCurrentState() {
        if (trainerClosed || !scaling.isEnabled() || !scaler.isStateOnDevice()) {
            return; // the host path writes the state after every step
        }
        // no read when a getter refreshed the mirror since the last step, but nothing wrote it
        trainer.getModel()
                .setProperty(SCALER_STATE_PROPERTY, scaler.state().withOrigin(scaling).toString());
    }

    private void restoreSavedState(Model model) {
        String saved = model.getProperty(SCALER_STATE_PROPERTY);
        if (saved == null) {
            return;
        }
        ScalerState state = ScalerState.parse(saved);
        String mismatch = state.mismatch(scaling);
        if (mismatch == null) {
            scaler.restore(state);
            logger.info(
                    "djl-amp: restored the loss scaler state saved with model {}: {}",
                    model.getName(),
                    state);
        } else {
            logger.info(
                    "djl-amp: ignored the loss scaler state saved with model {} ({}): {}",
                    model.getName(),
                    state,
                    mismatch);
        }
    }

    private String describePolicyChoice(Device device, NDManager manager) {
        if (!block.getPolicy().isAuto()) {
            return policy.toString();
        }
        return policy
                + " (auto on "
                + device
                + ": "
                + block.describePolicyChoice(device, manager)
                + ")";
    }

    /**
     * Returns the policy in use and, when it was chosen by "auto", why.
     *
     * @return for example {@code float32 (auto on cpu(): ...)}
     * @throws IllegalStateException before the session is attached to a trainer
     */
    public String getPolicyChoice() {
        requireAttached();
        return policyChoice;
    }

    /**
     * Tells the session its trainer was closed: a window of accumulated gradients that never
     * reached a step is cleared, a scaler state kept on the device is read (one host read) and
     * saved into the model's properties, and another trainer may now be made from the same
     * configuration.
     *
     * @param closing the trainer being closed
     * @throws LossScaleCollapsedException when that read finds the scale collapsed since the last
     * @throws AmpException when it finds a fixed scale overflowing {@value
     *     #FIXED_SCALE_OVERFLOW_LIMIT} steps in a row
     */
    void detach(Trainer closing) {
        if (closing != trainer || trainerClosed) {
            return;
        }
        if (pendingBatches > 0) {
            pendingBatches = 0;
            verdict = Verdict.UNCHECKED;
            clearTrainableGradients();
        }
        RuntimeException divergence = null;
        if (scaling.isEnabled() && !scaler.isMirrorFresh()) {
            // the state lives on the device (fused steps) and was last read at the last periodic
            // read: this is the run's last read, so a divergence since is reported here, and the
            // model, saved after training or given to the next trainer, gets the current state
            try {
                syncToHost();
            } catch (RuntimeException e) {
                divergence = e;
            }
            trainer.getModel()
                    .setProperty(
                            SCALER_STATE_PROPERTY, scaler.state().withOrigin(scaling).toString());
        }
        trainerClosed = true;
        if (divergence != null) {
            throwFromClose(closing, divergence);
        }
    }

    /**
     * Throws a divergence found at the trainer's close. DJL's {@code Trainer.close} stops at a
     * listener that throws, so what it would still have done is done first: the parameters synced
     * and the trainer's arrays freed (listeners after djl-amp's do not run: the run diverged).
     */
    private void throwFromClose(Trainer closing, RuntimeException divergence) {
        logger.error("djl-amp: found when the trainer closed: {}", divergence.getMessage());
        ParameterStore store = block.getTrainingLink().getTrainingStore();
        if (store != null) {
            store.sync();
        }
        closing.getManager().close();
        throw divergence;
    }

    private LossScaling scalingFor(Precision compute) {
        if (options.getLossScaling() != null) {
            return options.getLossScaling();
        }
        return compute.needsLossScaling() ? LossScaling.dynamic() : LossScaling.none();
    }

    /**
     * Returns the loss scaler.
     *
     * @return the scaler
     * @throws IllegalStateException before the session is attached to a trainer
     */
    public LossScaler getScaler() {
        requireAttached();
        return scaler;
    }

    /**
     * Sets what combines the gradients of several processes before each step's unscale-and-check
     * (data-parallel training), or null for none.
     *
     * @param reducer the reducer, or null
     */
    public void setGradientReducer(GradientReducer reducer) {
        this.gradientReducer = reducer;
    }

    /**
     * Returns the concrete policy in use.
     *
     * @return the policy ("auto" resolved)
     * @throws IllegalStateException before the session is attached to a trainer
     */
    public PrecisionPolicy getPolicy() {
        requireAttached();
        return policy;
    }

    /**
     * Returns the wrapped block.
     *
     * @return the block
     */
    public MixedPrecisionBlock getBlock() {
        return block;
    }

    /**
     * Returns the loss to pass to backward: its value is {@code loss}'s, so it can be logged as it
     * is, and its gradient is the loss scale's (what {@code trainer.getLoss().evaluate(...)}
     * already returns; scale only the loss of a {@code Loss} of your own).
     *
     * @param loss the unscaled loss
     * @return the loss scaled for backward
     * @throws AmpException when {@code loss} was already scaled by djl-amp
     * @throws IllegalStateException when this step's gradients were already unscaled and checked
     */
    public NDArray scale(NDArray loss) {
        requireAttached();
        if (SCALED_LOSS_NAME.equals(loss.getName())) {
            throw new AmpException(
                    "This loss is already scaled for backward (trainer.getLoss() of a trainer made"
                            + " with Amp.configure scales it, and so does AmpSession.scale):"
                            + " scaling it again would multiply its gradients by the scale twice."
                            + " Pass it to backward as it is.");
        }
        if (!scaling.isEnabled()) {
            return loss;
        }
        // value: the true loss; gradient: the scale (the difference is 0 in value, 1 in gradient)
        NDArray detached = loss.stopGradient();
        NDArray scaledDifference = scaler.scale(loss.sub(detached));
        NDArray scaled = scaledDifference.add(detached);
        scaledThisStep = true;
        scaled.setName(SCALED_LOSS_NAME);
        // x - x is 0 for a finite loss and NaN otherwise: remembered on the device, no host read
        NDArray health = detached.sub(detached).sum().toType(DataType.FLOAT32, false);
        lossHealth.addi(health.toDevice(lossHealth.getDevice(), false));
        return scaled;
    }

    /**
     * Unscales every device's gradients in place and checks them for Inf/NaN, for users who clip
     * gradients: clip after this, then call {@link #step()}, which skips the step on overflow.
     *
     * @throws IllegalStateException when the gradients of this step were already unscaled, or no
     *     loss was scaled for them
     */
    public void unscaleGradients() {
        requireAttached();
        if (scaling.isEnabled() && !scaledThisStep) {
            throw new IllegalStateException(
                    "No loss was scaled for this step's backward, so there is nothing to unscale:"
                            + " pass trainer.getLoss().evaluate(...) (or amp.scale(loss) of a Loss"
                            + " of your own) to backward before amp.step()");
        }
        try (NDManager stepManager = trainer.getManager().newSubManager()) {
            unscaleAndCheck(stepManager);
        }
        heldForStep = true;
    }

    /**
     * Ends a step of a custom loop: unscales and checks the gradients (unless {@link
     * #unscaleGradients()} did), runs {@code trainer.step()}, which updates the weights or, on
     * overflow, skips the update and clears the gradients, and moves the loss scale.
     *
     * @throws LossScaleCollapsedException when overflows push the scale below its minimum
     * @throws AmpException when a fixed scale overflowed on {@value #FIXED_SCALE_OVERFLOW_LIMIT}
     *     steps in a row
     * @throws IllegalStateException when no loss was scaled for this step's backward
     */
    public void step() {
        requireAttached();
        if (current() == Verdict.UNCHECKED) {
            unscaleGradients();
        }
        trainer.step();
        update();
        verdict = Verdict.UNCHECKED; // the next step() checks its own gradients
        heldForStep = false;
    }

    /**
     * Unscales every device's gradients in place and checks them for Inf/NaN; on overflow, the next
     * optimizer step is skipped.
     *
     * @param stepManager a manager closed at the end of the step
     * @return true when the step must be skipped
     */
    boolean unscaleAndCheck(NDManager stepManager) {
        requireAttached();
        // without scaling or reduction nothing is touched: skip making the gradient handles
        GradientSet gradients =
                scaling.isEnabled() || gradientReducer != null
                        ? gradients(stepManager)
                        : new GradientSet();
        if (gradientReducer != null) {
            gradientReducer.reduce(gradients, stepManager);
        }
        boolean overflow = scaler.unscaleAndCheck(gradients, stepManager);
        if (!scaler.isVerdictKnown()) {
            decide(Verdict.ON_DEVICE);
            if (buffers != null) {
                // the forward pass moved them with this batch: put back where the step skips
                buffers.restoreIf(backend, scaler.getFoundInfArray());
                buffers.clear();
            }
            return false;
        }
        decide(overflow ? Verdict.SKIP : Verdict.APPLY);
        if (buffers != null) {
            if (overflow) {
                buffers.restore(backend); // the forward pass moved them with this batch
            }
            buffers.clear();
        }
        return overflow;
    }

    /**
     * What {@code EasyTrain}'s loop does after each batch's backward: counts the batch towards the
     * accumulation window and, at its end, unscales and checks the gradients and moves the scale.
     *
     * @param stepManager a manager closed at the end of the batch
     */
    void afterBackward(NDManager stepManager) {
        requireAttached();
        pendingBatches++;
        if (pendingBatches < options.getAccumulationSteps()) {
            decide(Verdict.ACCUMULATE);
            return;
        }
        pendingBatches = 0;
        unscaleAndCheck(stepManager);
        update();
    }

    /**
     * Ends a gradient accumulation window that the epoch ended inside: its batches' gradients make
     * one step, checked and skipped like any other, instead of adding into the next epoch's or the
     * next trainer's first step.
     */
    void flushAccumulation() {
        if (trainer == null || trainerClosed || pendingBatches == 0) {
            return;
        }
        pendingBatches = 0;
        try (NDManager stepManager = trainer.getManager().newSubManager()) {
            unscaleAndCheck(stepManager);
        }
        trainer.step();
        update();
    }

    /**
     * Returns whether the optimizer step after this batch only accumulates gradients.
     *
     * @return true inside an accumulation window
     */
    boolean isAccumulating() {
        return current() == Verdict.ACCUMULATE;
    }

    /**
     * Returns whether the batch being reported was skipped: its loss is left out of the training
     * loss DJL reports, so one skipped step does not read as divergence.
     *
     * @return true between a skipping verdict and the next backward
     */
    boolean isReportingSkippedBatch() {
        if (current() == Verdict.ON_DEVICE) {
            // one host read, next to DJL's own host read of the loss for the same report
            return isSkipping();
        }
        return current() == Verdict.SKIP;
    }

    /**
     * Returns whether the loss is scaled and gradients checked.
     *
     * @return false under bf16 and fp32 by default
     */
    boolean isScaling() {
        return scaling != null && scaling.isEnabled();
    }

    /**
     * Moves the loss scale after the step and saves its state into the model's properties; with the
     * state on the device, the host's part (saving, divergence checks) runs at host reads only.
     */
    void update() {
        requireAttached();
        scaledThisStep = false;
        try {
            scaler.update();
        } catch (LossScaleCollapsedException e) {
            throw withLossDiagnosis(e);
        }
        afterHostRead();
    }

    /**
     * With the loss scaler state on the device (fused optimizer steps): reads it on the host now
     * (one read), reports a divergence found there and saves the state into the model's properties.
     * {@code EasyTrain} runs it at each epoch's end; {@code model.save(...)} and closing the
     * trainer save the current state without it. Does nothing when the state is on the host.
     *
     * @throws LossScaleCollapsedException when the scale collapsed since the last read
     * @throws AmpException when a fixed scale overflowed on {@value #FIXED_SCALE_OVERFLOW_LIMIT}
     *     steps in a row since the last read
     */
    public void syncToHost() {
        if (trainer == null || trainerClosed || !scaling.isEnabled()) {
            return;
        }
        try {
            scaler.syncToHost();
        } catch (LossScaleCollapsedException e) {
            throw withLossDiagnosis(e);
        }
        afterHostRead();
    }

    /**
     * Writes the optimizer's state to {@code file}: SGD's or Nag's momentum or Adam's moments and
     * DJL's update counts, by parameter name, with DJL's meaning, whether the steps are DJL's own
     * or fused. DJL's {@code model.save} keeps no optimizer state; save this beside it to resume
     * exactly ({@link #loadOptimizerState(Path)}). Covers DJL's Sgd, Adam, AdamW and Nag; written
     * through a temporary file, so a crash leaves the previous file whole.
     *
     * @param file where to write
     * @throws IOException when the file cannot be written
     * @throws AmpException for another optimizer
     */
    public void saveOptimizerState(Path file) throws IOException {
        requireAttached();
        OptimizerStateFile.save(this, requireOptimizer(), file);
    }

    /**
     * Reads an optimizer state written by {@link #saveOptimizerState(Path)} into this trainer's
     * optimizer, before its first step (right after {@code trainer.initialize}). A state saved with
     * fused steps loads into DJL's own update and the other way round.
     *
     * @param file the saved state
     * @throws IOException when the file cannot be read
     * @throws AmpException when the file is not such a state, the optimizer differs, the model
     *     lacks one of its parameters or a shape differs, or the trainer has already stepped
     */
    public void loadOptimizerState(Path file) throws IOException {
        requireAttached();
        OptimizerStateFile.load(this, requireOptimizer(), file);
    }

    private LossScalingOptimizer requireOptimizer() {
        if (optimizer == null) {
            throw new AmpException(
                    "This trainer's optimizer is not djl-amp's: configure the trainer with"
                            + " Amp.configure(...)");
        }
        return optimizer;
    }

    private LossScaleCollapsedException withLossDiagnosis(LossScaleCollapsedException e) {
        if (!e.isLossNonFinite() && lossWasNonFinite()) {
            // the diagnosis only sees the losses still alive: the session remembers them all
            return new LossScaleCollapsedException(
                    scaling.getMinScale(), e.getNonFiniteParameters(), true);
        }
        return e;
    }

    /** Divergence checks and the saved state, whenever the host mirror is current. */
    private void afterHostRead() {
        if (!scaling.isEnabled() || !scaler.isMirrorFresh()) {
            return; // the state is on the device and was not read this step
        }
        if (scaling.getMode() == LossScaling.Mode.STATIC
                && scaler.takeLongestOverflowRun() >= FIXED_SCALE_OVERFLOW_LIMIT) {
            AmpException failure = fixedScaleFailure(lossWasNonFinite());
            scaler.resetOverflowRun();
            backend.zero(new NDList(lossHealth));
            throw failure;
        }
        backend.zero(new NDList(lossHealth));
        trainer.getModel()
                .setProperty(SCALER_STATE_PROPERTY, scaler.state().withOrigin(scaling).toString());
    }

    private AmpException fixedScaleFailure(boolean lossNonFinite) {
        String what =
                "The fixed loss scale "
                        + scaling.getInitScale()
                        + " overflowed on "
                        + FIXED_SCALE_OVERFLOW_LIMIT
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

    /**
     * Records that an optimizer state was loaded: until the next training forward, again is fine.
     */
    void markOptimizerStateLoaded() {
        optimizerStateLoadedAt = block.getTrainingLink().getTrainingForwardCount();
    }

    /** Whether an optimizer state was loaded and no training forward pass (so no step) followed. */
    boolean isOptimizerStateUntouchedSinceLoad() {
        return optimizerStateLoadedAt >= 0
                && optimizerStateLoadedAt == block.getTrainingLink().getTrainingForwardCount();
    }

    /**
     * Returns whether the optimizer must skip the current step.
     *
     * @return true after an overflow was found in this step's gradients; false whenever the loss is
     *     not scaled (nothing can overflow the scale then)
     * @throws IllegalStateException when this step's gradients were never checked under loss
     *     scaling
     */
    public boolean isSkipping() {
        if (current() == Verdict.UNCHECKED && !isScaling()) {
            return false; // bf16 and fp32: a custom loop needs no scaler calls
        }
        requireChecked();
        if (current() == Verdict.ON_DEVICE) {
            // asked for: one host read (the flag stands until the next step's check)
            boolean skip = backend.readFloat(scaler.getFoundInfArray()) != 0f;
            decide(skip ? Verdict.SKIP : Verdict.APPLY);
        }
        return verdict == Verdict.SKIP;
    }

    /**
     * Throws when the optimizer runs before this step's gradients were checked under loss scaling.
     */
    void requireChecked() {
        if (current() == Verdict.UNCHECKED) {
            if (!isScaling()) {
                return; // bf16 and fp32: a custom loop needs no scaler calls
            }
            throw new IllegalStateException(
                    "The optimizer ran before djl-amp checked the gradients: with EasyTrain keep"
                            + " the AmpTrainingListener that Amp.configure adds; in a custom loop"
                            + " end each step with AmpSession.step() instead of trainer.step()");
        }
    }

    /**
     * Gives the session its optimizer, which runs fused steps when the options and the attached
     * trainer's devices ask for them: then the loss scaler keeps its state on the device and the
     * verdict is not read every step.
     *
     * @param optimizer the configuration's optimizer
     */
    void setOptimizer(LossScalingOptimizer optimizer) {
        this.optimizer = optimizer;
    }

    /** Whether the attached trainer's optimizer steps are fused and skip on the device. */
    boolean isFusedOptimizer() {
        return fusedOptimizer;
    }

    /**
     * Returns whether this step is known on the host to be skipped, without reading the device.
     *
     * @return true only when the verdict is on the host and says skip
     */
    boolean isKnownSkip() {
        return current() == Verdict.SKIP;
    }

    /**
     * Clears the real gradient of a weight whose update is skipped, so it does not add into the
     * next step (DJL zeroes gradients only inside its optimizers' updates).
     *
     * @param weight a parameter's device copy
     */
    void clearGradient(NDArray weight) {
        try (NDArray grad = weight.getGradient()) {
            backend.zero(new NDList(grad));
        }
    }

    /** The engine layer, for fused optimizer steps. */
    AmpBackend getBackend() {
        requireAttached();
        return backend;
    }

    /**
     * Tells the session a master weight changed, so its 16-bit casts are stale.
     *
     * @param parameterId the parameter's id
     */
    void weightUpdated(String parameterId) {
        WeightCastCache cache = block.getTrainingLink().getCastCache();
        if (cache != null) {
            cache.invalidate(parameterId);
        }
    }

    /**
     * Collects every device's gradient of every trainable parameter; the handles belong to {@code
     * stepManager}.
     */
    private GradientSet gradients(NDManager stepManager) {
        GradientSet set = new GradientSet();
        ParameterStore store = block.getTrainingLink().getTrainingStore();
        Device[] devices = trainer.getDevices();
        refreshTrainable();
        for (Pair<String, Parameter> pair : trainable) {
            Parameter parameter = pair.getValue();
            if (!parameter.isInitialized()) {
                continue;
            }
            for (int replica = 0; replica < devices.length; replica++) {
                NDArray weight =
                        store != null
                                ? store.getValue(parameter, devices[replica], true)
                                : parameter.getArray();
                NDArray grad = weight.getGradient();
                grad.attach(stepManager);
                set.add(pair.getKey(), replica, grad);
                if (store == null) {
                    break;
                }
            }
        }
        return set;
    }

    /**
     * Returns the trainable parameters (requiresGradient), from a list kept between steps: walking
     * DJL's block tree for them costs about 0.1 ms a step on ResNet-50.
     */
    List<Pair<String, Parameter>> trainableParameters() {
        refreshTrainable();
        return trainable;
    }

    /**
     * Lists the trainable parameters again when a requiresGradient flag changed since the last step
     * (a layer frozen or unfrozen mid-training) or the tree itself changed (a head replaced after
     * wrapping); otherwise a loop over cached flags.
     */
    private void refreshTrainable() {
        if (parameters == null
                || parametersTreeVersion != block.getTrainingLink().getTreeVersion()) {
            parametersTreeVersion = block.getTrainingLink().getTreeVersion();
            parameters = new ArrayList<>();
            for (Pair<String, Parameter> pair : block.getParameters()) {
                parameters.add(pair);
            }
            trainableFlags = new boolean[parameters.size()];
            trainable = null;
        }
        boolean changed = trainable == null;
        for (int i = 0; i < trainableFlags.length; i++) {
            boolean flag = parameters.get(i).getValue().requiresGradient();
            if (flag != trainableFlags[i]) {
                trainableFlags[i] = flag;
                changed = true;
            }
        }
        if (changed) {
            trainable = new ArrayList<>();
            for (int i = 0; i < trainableFlags.length; i++) {
                if (trainableFlags[i]) {
                    trainable.add(parameters.get(i));
                }
            }
        }
    }

    private void clearTrainableGradients() {
        if (block.getTrainingLink().getTrainingStore() == null) {
            return;
        }
        try (NDManager scratch = trainer.getManager().newSubManager()) {
            GradientSet set = gradients(scratch);
            for (NDList group : set.byReplica().values()) {
                backend.zero(group);
            }
        }
    }

    private void requireAttached() {
        if (trainer == null) {
            throw new IllegalStateException(
                    "The AMP session is not attached to a trainer yet: call"
                            + " AmpSession.of(trainer) (EasyTrain does this in onTrainingBegin)");
        }
    }

    /**
     * Returns the model being trained.
     *
     * @return the model
     * @throws IllegalStateException before the session is attached to a trainer
     */
    public Model getModel() {
        requireAttached();
        return trainer.getModel();
    }

    /** Frees the scaler's device state. */
    @Override
    public void close() {
        if (scaler != null) {
            scaler.close();
        }
        if (sessionManager != null) {
            sessionManager.close();
        }
    }
}
