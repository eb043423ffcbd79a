package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Parameter;
import ai.djl.training.Trainer;
import ai.djl.util.Pair;
import io.github.djlamp.amp.capture.CapturedStep;
import io.github.djlamp.amp.capture.StepBody;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.scale.GradientSet;
import io.github.djlamp.amp.scale.LossScaleCollapsedException;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.StepGraphs;
import io.github.djlamp.amp.train.StepVerdict.Verdict;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;

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

    private final MixedPrecisionBlock block;
    private final SessionSettings settings;
    private final StepVerdict verdict;
    private final GradientAccumulation accumulation;
    private final TrainableGradients trainable;
    private final SessionPersistence persistence;
    private final FirstStepGradientCheck firstStepCheck = new FirstStepGradientCheck();
    private LossScalingOptimizer optimizer;
    private AttachedTrainer attached;
    private boolean trainerClosed;
    private boolean scaledThisStep;
    private EasyTrainCapture easyTrainCapture;
    private StepGraphs stepGraphs;

    /**
     * Creates a session for a wrapped block: {@link io.github.djlamp.amp.Amp#configure} does, and
     * {@link #of(Trainer)} finds it.
     *
     * @param block the wrapped block being trained
     * @param settings loss scaling, gradient accumulation, host reads and fused steps
     */
    public AmpSession(MixedPrecisionBlock block, SessionSettings settings) {
        this.block = Objects.requireNonNull(block, "block: pass the block Amp.wrap(...) returned");
        this.settings = Objects.requireNonNull(settings, "settings: Amp.configure makes them");
        verdict = new StepVerdict(block);
        accumulation = new GradientAccumulation(this, verdict, settings.getAccumulationSteps());
        trainable = new TrainableGradients(block);
        persistence = new SessionPersistence(block);
    }

    /**
     * Returns the session of a trainer configured with {@link io.github.djlamp.amp.Amp#configure}.
     *
     * @param trainer the trainer
     * @return its session, attached to it
     * @throws NullPointerException when {@code trainer} is null, naming what to pass
     * @throws AmpException when the trainer was not configured through Amp.configure
     */
    public static AmpSession of(Trainer trainer) {
        Objects.requireNonNull(
                trainer,
                "AmpSession.of needs the trainer, got null: pass the Trainer made by"
                        + " model.newTrainer(Amp.configure(config, block))");
        AmpSession session = AmpTrainingListener.sessionOf(trainer);
        if (session == null) {
            throw SessionChecks.notConfigured();
        }
        session.attach(trainer);
        return session;
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
        if (attached != null && attached.trainer() == trainer) {
            return;
        }
        SessionChecks.requireNoOpenTrainer(attached != null && !trainerClosed);
        SessionChecks.requireBlock(trainer, block);
        AttachedTrainer next =
                AttachedTrainer.bind(trainer, block, settings, optimizer, persistence);
        close(); // the previous trainer's device state and captured step
        attached = next;
        easyTrainCapture = new EasyTrainCapture(this, trainer);
        block.getTrainingLink().setStepInForward(easyTrainCapture);
        firstStepCheck.takeOver(trainer, block.getTrainingLink());
        trainerClosed = false;
        accumulation.dropOpenWindow();
        verdict.reset();
    }

    /**
     * The trainer closed: an open accumulation window is cleared, a scaler state kept on the device
     * is read one last time (a divergence since the last read is thrown) and saved with the model,
     * and the configuration may make another trainer.
     */
    void detach(Trainer closing) {
        if (attached == null || closing != attached.trainer() || trainerClosed) {
            return;
        }
        if (accumulation.dropOpenWindow()) {
            verdict.reset();
            trainable.clear(attached.backend(), closing.getDevices(), closing.getManager());
        }
        closeEasyTrainCapture();
        RuntimeException divergence = attached.lastRead();
        trainerClosed = true;
        persistence.trainerClosed();
        DivergenceChecks.throwAtClose(
                closing, block.getTrainingLink().getTrainingStore(), divergence);
    }

    /**
     * Returns the loss to pass to backward: its value is {@code loss}'s, so it can be logged as it
     * is, and its gradient is the loss scale's (what {@code trainer.getLoss().evaluate(...)}
     * already returns; scale only the loss of a {@code Loss} of your own).
     *
     * @param loss the unscaled loss
     * @return the loss scaled for backward
     * @throws NullPointerException when {@code loss} is null, naming what to pass
     * @throws AmpException when {@code loss} was already scaled by djl-amp
     * @throws IllegalStateException when this step's gradients were already unscaled and checked
     */
    public NDArray scale(NDArray loss) {
        Objects.requireNonNull(
                loss,
                "AmpSession.scale needs the step's loss, got null: pass the array your loss"
                        + " computed inside the GradientCollector, e.g."
                        + " collector.backward(amp.scale(loss))");
        SessionChecks.requireAttached(attached);
        SessionChecks.requireNotScaledYet(loss);
        if (!attached.isScaling()) {
            return loss;
        }
        NDArray scaled = attached.scale(loss);
        scaledThisStep = true;
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
        SessionChecks.requireAttached(attached);
        SessionChecks.requireLossScaled(scaledThisStep || !attached.isScaling());
        try (NDManager stepManager = attached.trainer().getManager().newSubManager()) {
            unscaleAndCheck(stepManager);
        }
        verdict.holdForStep();
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
        SessionChecks.requireAttached(attached);
        if (verdict.current() == Verdict.UNCHECKED) {
            unscaleGradients();
        }
        attached.trainer().step();
        update();
        verdict.reset(); // the next step() checks its own gradients
    }

    /**
     * Returns a step of a custom loop that is captured once into a graph after {@value
     * CapturedStep#DEFAULT_WARM_UP_STEPS} eager warm-up steps and replayed for every later batch of
     * the same shapes, one launch a step (see {@link CapturedStep}: what the body may do, and when
     * every step runs eagerly instead).
     *
     * @param body the step's forward, loss and backward, returning what the loop reads after it
     * @return the captured step; close it after the loop
     * @throws NullPointerException when {@code body} is null
     */
    public CapturedStep captureStep(StepBody body) {
        return captureStep(body, CapturedStep.DEFAULT_WARM_UP_STEPS);
    }

    /**
     * Returns a captured step (see {@link #captureStep(StepBody)}) with {@code warmUpSteps} eager
     * steps before the capture.
     *
     * @param body the step's forward, loss and backward, returning what the loop reads after it
     * @param warmUpSteps eager steps before the capture, at least 1
     * @return the captured step; close it after the loop
     * @throws IllegalArgumentException when {@code warmUpSteps} is below 1
     */
    public CapturedStep captureStep(StepBody body, int warmUpSteps) {
        return captureStep(body, warmUpSteps, null);
    }

    /**
     * Returns a captured step (see {@link #captureStep(StepBody)}) on {@code graphs} instead of the
     * engine's: a stand-in that measures or tests the plan where there is no GPU.
     *
     * @param body the step's forward, loss and backward, returning what the loop reads after it
     * @param warmUpSteps eager steps before the capture, at least 1
     * @param graphs the graphs to capture with, or null for the engine's
     * @return the captured step; close it after the loop
     * @throws IllegalArgumentException when {@code warmUpSteps} is below 1
     */
    public CapturedStep captureStep(StepBody body, int warmUpSteps, StepGraphs graphs) {
        SessionChecks.requireAttached(attached);
        return new CapturedStep(
                new SessionCapture(
                        this,
                        attached,
                        settings,
                        optimizer,
                        trainable,
                        graphs != null ? graphs : stepGraphs()),
                body,
                warmUpSteps);
    }

    /** The graphs steps are captured with: the engine's, unless a test stood others in. */
    StepGraphs stepGraphs() {
        return stepGraphs != null ? stepGraphs : getBackend().stepGraphs();
    }

    /**
     * Captures this session's steps ({@code EasyTrain.fit}'s and {@link #captureStep(StepBody)}'s
     * made later) with {@code graphs} instead of the engine's: a stand-in that measures or tests
     * the plan where there is no GPU. {@code EasyTrain.fit} decides at its first batch.
     *
     * @param graphs the graphs to capture with, or null for the engine's
     */
    public void setStepGraphs(StepGraphs graphs) {
        stepGraphs = graphs;
    }

    /**
     * {@code EasyTrain}'s loss for backward after a step its forward completed (see {@link
     * EasyTrainCapture}), or null.
     */
    NDArray takeLossOfCompletedStep(NDList labels) {
        return easyTrainCapture == null ? null : easyTrainCapture.takeLossOfCompletedStep(labels);
    }

    /** {@code EasyTrain.fit}'s captured step of the attached trainer, or null: for tests. */
    CapturedStep easyTrainStep() {
        return easyTrainCapture == null ? null : easyTrainCapture.step();
    }

    /** Why {@code EasyTrain.fit}'s step is not captured, or null: for tests. */
    String easyTrainRefusal() {
        return easyTrainCapture == null ? null : easyTrainCapture.refusal();
    }

    /** At an epoch's end: a captured EasyTrain step gives the thread its stream back. */
    void pauseCapture() {
        if (easyTrainCapture != null) {
            easyTrainCapture.pause();
        }
    }

    private void closeEasyTrainCapture() {
        if (easyTrainCapture != null) {
            easyTrainCapture.close();
            easyTrainCapture = null;
            block.getTrainingLink().setStepInForward(null);
        }
    }

    /**
     * Whether the batch being reported is one whose step {@code EasyTrain.fit}'s forward already
     * completed ({@link EasyTrainCapture}): the listener's after-backward work is done, a skipped
     * step is read from the device's flag, and {@code trainer.step()} does nothing.
     */
    boolean isStepDoneBeforeListeners() {
        return easyTrainCapture != null && easyTrainCapture.isStepDone();
    }

    /**
     * Whether the completed step was skipped for overflow: its flag stays on the device until the
     * next step's check (one host read).
     */
    boolean wasCompletedStepSkipped() {
        SessionChecks.requireAttached(attached);
        return attached.isScaling()
                && attached.backend().readFloat(attached.scaler().getFoundInfArray()) != 0f;
    }

    /** A captured step's capture did not hold: the step starts again. */
    void abandonStep() {
        scaledThisStep = false;
        verdict.reset();
    }

    /** EasyTrain, after each batch's backward: see {@link GradientAccumulation}. */
    void afterBackward(NDManager batchManager) {
        SessionChecks.requireAttached(attached);
        recomputeCheckpointedSegments();
        accumulation.afterBackward(batchManager);
    }

    /** EasyTrain, at each epoch's end: steps an accumulation window the epoch ended inside. */
    void flushAccumulation() {
        if (attached != null && !trainerClosed) {
            accumulation.flush(attached.trainer());
        }
    }

    /** Reduces (data parallel), unscales and checks every device's gradients: the verdict. */
    void unscaleAndCheck(NDManager stepManager) {
        SessionChecks.requireAttached(attached);
        recomputeCheckpointedSegments();
        Device[] devices = attached.trainer().getDevices();
        GradientSet gradients = trainable.forCheck(devices, stepManager, attached.isScaling());
        verdict.decide(attached.check(gradients, stepManager));
    }

    /**
     * Completes the gradients of checkpointed segments (see {@link
     * io.github.djlamp.amp.policy.Checkpointing}): after backward, before they are reduced across
     * processes and checked.
     */
    void recomputeCheckpointedSegments() {
        block.getTrainingLink().getCheckpoints().recompute();
    }

    /**
     * Returns how many runs of checkpointed segments ({@code AmpOptions} checkpointing) were
     * recomputed after backward so far: a segment once per training forward pass.
     *
     * @return the count, 0 when nothing is checkpointed
     */
    public long getRecomputedSegments() {
        return block.getTrainingLink().getCheckpoints().getRecomputedSegments();
    }

    /** Whether forward passes left checkpointed segments that no step has recomputed. */
    /** At a step's first update: see {@link FirstStepGradientCheck}. */
    void checkFirstStepGradients() {
        firstStepCheck.check(attached.trainer(), trainable, block.getTrainingLink());
    }

    boolean hasCheckpointsPending() {
        return block.getTrainingLink().getCheckpoints().hasPending();
    }

    /** Moves the loss scale after the step (see {@link AttachedTrainer#update()}). */
    void update() {
        SessionChecks.requireAttached(attached);
        scaledThisStep = false;
        attached.update();
        block.getTrainingLink().afterStep();
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
        if (attached == null || trainerClosed || !attached.isScaling()) {
            return;
        }
        attached.syncToHost();
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
        // asked for: one host read of a verdict left on the device
        return verdict.isSkipping(isScaling(), () -> attached.readVerdict());
    }

    /** The step's verdict, for the optimizer and the loss's report. */
    StepVerdict verdict() {
        return verdict;
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
     * @throws NullPointerException when {@code file} is null, naming what to pass
     * @throws AmpException for another optimizer
     */
    public void saveOptimizerState(Path file) throws IOException {
        Objects.requireNonNull(
                file,
                "AmpSession.saveOptimizerState needs the file to write, got null: pass a Path,"
                        + " e.g. modelDir.resolve(\"optimizer.state\") beside model.save(modelDir,"
                        + " name)");
        SessionChecks.requireAttached(attached);
        persistence.saveOptimizerState(this, optimizer, file);
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
        SessionChecks.requireAttached(attached);
        persistence.loadOptimizerState(this, optimizer, file);
    }

    /**
     * Sets what combines the gradients of several processes before each step's unscale-and-check
     * (data-parallel training), or null for none.
     *
     * @param reducer the reducer, or null
     */
    public void setGradientReducer(GradientReducer reducer) {
        trainable.setReducer(reducer);
    }

    /** Gives the session its optimizer, whose steps are planned at each attach. */
    void setOptimizer(LossScalingOptimizer optimizer) {
        this.optimizer = optimizer;
    }

    /** The trainer's optimizer, or null before {@code Amp.configure} made it. */
    LossScalingOptimizer getOptimizer() {
        return optimizer;
    }

    /**
     * Returns the loss scaler.
     *
     * @return the scaler
     * @throws IllegalStateException before the session is attached to a trainer
     */
    public LossScaler getScaler() {
        SessionChecks.requireAttached(attached);
        return attached.scaler();
    }

    /**
     * Returns the concrete policy in use.
     *
     * @return the policy ("auto" resolved)
     * @throws IllegalStateException before the session is attached to a trainer
     */
    public PrecisionPolicy getPolicy() {
        SessionChecks.requireAttached(attached);
        return attached.policy();
    }

    /**
     * Returns the policy in use and, when it was chosen by "auto", why.
     *
     * @return for example {@code float32 (auto on cpu(): ...)}
     * @throws IllegalStateException before the session is attached to a trainer
     */
    public String getPolicyChoice() {
        SessionChecks.requireAttached(attached);
        return attached.policyChoice();
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
     * Returns the model being trained.
     *
     * @return the model
     * @throws IllegalStateException before the session is attached to a trainer
     */
    public Model getModel() {
        SessionChecks.requireAttached(attached);
        return attached.trainer().getModel();
    }

    /** Whether the loss is scaled and gradients checked: false under bf16 and fp32 by default. */
    boolean isScaling() {
        return attached != null && attached.isScaling();
    }

    /** Steps between host reads of the attached trainer's scaler state when it is on the device. */
    int hostSyncInterval() {
        SessionChecks.requireAttached(attached);
        return attached.hostSyncInterval();
    }

    /** Whether the attached trainer's optimizer steps are fused and skip on the device. */
    boolean isFusedOptimizer() {
        return attached != null && attached.fused();
    }

    /** The engine layer, for fused optimizer steps and the optimizer state file. */
    AmpBackend getBackend() {
        SessionChecks.requireAttached(attached);
        return attached.backend();
    }

    /** The trainable parameters, from a list kept between steps. */
    List<Pair<String, Parameter>> trainableParameters() {
        return trainable.trainableParameters();
    }

    /** Frees the scaler's device state and a captured EasyTrain step. */
    @Override
    public void close() {
        closeEasyTrainCapture();
        if (attached != null) {
            attached.close();
        }
    }
}
