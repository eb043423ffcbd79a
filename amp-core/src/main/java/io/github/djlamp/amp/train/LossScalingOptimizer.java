package io.github.djlamp.amp.train;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.training.optimizer.Nag;
import ai.djl.training.optimizer.Optimizer;
import io.github.djlamp.amp.cast.internal.WeightCastCache;
import io.github.djlamp.amp.exception.AmpException;
import java.util.Objects;

/**
 * Decorates any DJL {@link Optimizer} (Sgd, Adam, AdamW, Nag, ...) for mixed precision.
 *
 * <p>By the time DJL calls {@link #update}, djl-amp has unscaled the gradients in place, so the
 * inner optimizer's gradient clipping and weight decay see true gradients. On a step whose
 * gradients overflowed, the inner optimizer is not called at all, so weights and its state
 * (moments, update counts) stay exactly as they were, and the gradient is cleared so it does not
 * add into the next step. Inside a gradient accumulation window nothing happens, so gradients add
 * up. After a real update, the weight's 16-bit casts are dropped.
 *
 * <p>When the session asks for fused steps ({@link io.github.djlamp.amp.FusedOptimizer}: on one
 * device by default), DJL's Sgd, Adam, AdamW and Nag ({@link FusedOptimizerKinds}) on one device,
 * with any learning rate {@code Tracker}, run as one fused launch for all parameters that skips on
 * the device ({@link FusedUpdate}); every other optimizer keeps its own per-parameter update.
 */
public final class LossScalingOptimizer extends Optimizer {

    private final Optimizer inner;

    /**
     * The system property that decides for {@link io.github.djlamp.amp.FusedOptimizer#AUTO} ({@code
     * -Ddjlamp.fusedOptimizer=on|off|auto}, read once when the options are built).
     *
     * @deprecated the same name as {@link io.github.djlamp.amp.FusedOptimizer#PROPERTY}, which
     *     documents it: use that
     */
    // spelled out, so that this package needs nothing of the front door; a test checks they match
    @Deprecated public static final String FUSED_PROPERTY = "djlamp.fusedOptimizer";

    private final AmpSession session;
    private FusedUpdate fused;
    private boolean fusedPlanned;

    /**
     * Wraps an optimizer.
     *
     * @param inner the optimizer that updates the weights
     * @param session the AMP session whose verdict decides skips
     */
    public LossScalingOptimizer(Optimizer inner, AmpSession session) {
        super(new NoOptions());
        this.inner = Objects.requireNonNull(inner, "inner");
        this.session = Objects.requireNonNull(session, "session");
        if (inner instanceof LossScalingOptimizer) {
            throw new IllegalArgumentException(
                    "The optimizer is already a LossScalingOptimizer; configure AMP once");
        }
        session.setOptimizer(this);
    }

    /**
     * Plans the fused steps on the first call (logging why when the inner optimizer has none) and
     * returns whether they can run. Once planned, the fused path keeps its own optimizer state.
     *
     * @return true when the inner optimizer has a fused version
     */
    boolean planFusedSteps() {
        if (!fusedPlanned) {
            fused = FusedUpdate.plan(inner);
            fusedPlanned = true;
        }
        return fused != null;
    }

    /**
     * Whether the inner optimizer's only update is djl-amp's fused one: DJL's {@code Nag}, which
     * DJL's PyTorch engine cannot update ({@code nagUpdate} is not implemented).
     */
    boolean onlyFusedUpdates() {
        return inner.getClass() == Nag.class;
    }

    /**
     * Returns the wrapped optimizer.
     *
     * @return the inner optimizer
     */
    public Optimizer getInner() {
        return inner;
    }

    /**
     * Returns whether the updates run as one fused, device-skipping launch per step: decided when a
     * trainer is attached, from {@link io.github.djlamp.amp.AmpOptions#getFusedOptimizer()}, the
     * trainer's devices and the inner optimizer.
     *
     * @return true when fused
     */
    public boolean isFused() {
        return fused != null && session.isFusedOptimizer();
    }

    /**
     * Returns the fused path's optimizer state of one parameter, owned by this optimizer: SGD's or
     * Nag's momentum buffer (empty without momentum), or Adam's first and second moments, in the
     * order of DJL's own state (see {@code FusedSgd} and {@code FusedNag} for how a momentum buffer
     * differs from DJL's by the learning rate). DJL's optimizer object is not updated on the fused
     * path; this is the state that a skipped step leaves bitwise unchanged.
     *
     * @param parameterId the parameter's id
     * @return the buffers, empty before the parameter's first step or when not fused
     */
    public NDList getFusedState(String parameterId) {
        return fused == null ? new NDList() : fused.state(parameterId);
    }

    /**
     * Returns the fused path's device copy of DJL's update count, a one-element FLOAT64 array owned
     * by this optimizer: as DJL's optimizers count, the largest count of applied (not skipped)
     * steps of any parameter so far, plus beginNumUpdate; a learning rate schedule and Adam's bias
     * corrections are computed from it.
     *
     * @return the count, or null before the first step or when not fused
     */
    public NDArray getFusedStepCount() {
        return fused == null ? null : fused.stepCount();
    }

    /** The fused update when the steps are fused, else null. */
    FusedUpdate fusedUpdate() {
        return isFused() ? fused : null;
    }

    /** {@inheritDoc} */
    @Override
    public void update(String parameterId, NDArray weight, NDArray grad) {
        StepVerdict verdict = session.verdict();
        if (session.hasCheckpointsPending()) {
            throw new IllegalStateException(
                    "Checkpointed segments were not recomputed before trainer.step(): their"
                            + " gradients are incomplete, and no weight was changed. With"
                            + " AmpOptions checkpointing, end a custom loop's step with"
                            + " AmpSession.of(trainer).step() (or unscaleGradients() first), or"
                            + " train with EasyTrain");
        }
        session.checkFirstStepGradients();
        if (verdict.isAccumulating()) {
            return;
        }
        if (isFused()) {
            verdict.requireChecked(session.isScaling());
            // one launch for every parameter at the step's first call, skipped on the device:
            // the verdict is not read on the host
            fused.update(session, weight.getDevice(), parameterId);
            if (!verdict.isKnownSkip()) {
                weightUpdated(parameterId); // recasting an unchanged weight is harmless
            }
            return;
        }
        if (session.isSkipping()) {
            // DJL zeroes gradients only inside its optimizers' updates: the skipped one would add
            // into the next step
            try (NDArray gradient = weight.getGradient()) {
                session.getBackend().zero(new NDList(gradient));
            }
            return;
        }
        try {
            inner.update(parameterId, weight, grad);
        } catch (UnsupportedOperationException e) {
            throw inner instanceof Nag ? nagWithoutUpdate(e) : e;
        }
        weightUpdated(parameterId);
    }

    /**
     * DJL's Nag calls its engine's {@code nagUpdate}, which DJL's PyTorch engine lacks (a bare "Not
     * implemented"; plain DJL fails the same way): says so, and that djl-amp's fused Nag gives one.
     */
    private static AmpException nagWithoutUpdate(UnsupportedOperationException cause) {
        return new AmpException(
                "DJL's Nag has no update in this engine (DJL's PyTorch engine does not implement"
                        + " nagUpdate: \""
                        + cause.getMessage()
                        + "\"; plain DJL fails the same way), and this trainer runs DJL's own"
                        + " per-parameter update (FusedOptimizer.OFF, or several devices)."
                        + " djl-amp's fused Nag has one: configure with"
                        + " AmpOptions.builder().fusedOptimizer(FusedOptimizer.ON) or AUTO and"
                        + " train on one device, or use Sgd with momentum. No weight was changed.",
                cause);
    }

    /** The master weight changed: its 16-bit casts are stale. */
    private void weightUpdated(String parameterId) {
        WeightCastCache cache = session.getBlock().getTrainingLink().getCastCache();
        if (cache != null) {
            cache.invalidate(parameterId);
        }
    }

    /** The decorator has no options of its own: the inner optimizer has them all. */
    private static final class NoOptions extends OptimizerBuilder<NoOptions> {
        @Override
        protected NoOptions self() {
            return this;
        }
    }
}
