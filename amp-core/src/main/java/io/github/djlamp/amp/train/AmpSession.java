package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.listener.TrainingListener;
import ai.djl.util.Pair;
import io.github.djlamp.amp.AmpException;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.cast.BufferSnapshot;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.cast.WeightCastCache;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.scale.GradientSet;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.scale.ScalerState;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.ArrayList;
import java.util.List;

/**
 * The mixed precision state of one trainer, and the verb API for custom training loops.
 *
 * <p>With {@code EasyTrain}, {@link io.github.djlamp.amp.Amp#configure} wires it in and nothing
 * here needs calling. In a custom loop:
 *
 * <pre>{@code
 * AmpSession amp = AmpSession.of(trainer);
 * try (GradientCollector collector = trainer.newGradientCollector()) {
 *     NDArray loss = loss.evaluate(labels, trainer.forward(data));
 *     collector.backward(amp.scale(loss));
 * }
 * amp.unscaleAndCheck(batch.getManager()); // one fused check over every device's gradients
 * trainer.step();                          // the LossScalingOptimizer skips it on overflow
 * amp.update();                            // the scale moves
 * }</pre>
 */
public final class AmpSession implements AutoCloseable {

    /** The model property the scaler state is saved under. */
    public static final String SCALER_STATE_PROPERTY = "djl-amp.scaler";

    private final MixedPrecisionBlock block;
    private final AmpOptions options;
    private int pendingBatches;
    private Trainer trainer;
    private AmpBackend backend;
    private LossScaler scaler;
    private BufferSnapshot buffers;
    private List<Pair<String, Parameter>> trainable;
    private PrecisionPolicy policy;
    private GradientReducer gradientReducer;
    private Verdict verdict = Verdict.UNCHECKED;

    private enum Verdict {
        UNCHECKED,
        APPLY,
        SKIP,
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
     * the loss scaler there, and restores scaler state saved with the model. Idempotent.
     *
     * @param trainer the trainer
     */
    public void attach(Trainer trainer) {
        if (this.trainer == trainer) {
            return;
        }
        if (trainer.getModel().getBlock() != block) {
            throw new AmpException(
                    "The trainer's model block is not the MixedPrecisionBlock this session was"
                            + " configured with: call model.setBlock(wrapped) before"
                            + " model.newTrainer(Amp.configure(config, wrapped))");
        }
        this.trainer = trainer;
        Device device = trainer.getDevices()[0];
        NDManager manager = trainer.getManager();
        backend = AmpBackends.forManager(manager);
        policy = block.resolvePolicy(device, manager);
        if (scaler != null) {
            scaler.close();
        }
        LossScaling scaling = scalingFor(policy.getComputePrecision());
        scaler = new LossScaler(scaling, backend, manager, device);
        buffers = scaling.isEnabled() ? block.enableBufferSnapshots() : null;
        String saved = trainer.getModel().getProperty(SCALER_STATE_PROPERTY);
        if (saved != null) {
            scaler.restore(ScalerState.parse(saved));
        }
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
     * @throws AmpException before the session is attached to a trainer
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
     * Scales a loss for backward; see {@link LossScaler#scale(NDArray)}.
     *
     * @param loss the unscaled loss
     * @return the scaled loss
     */
    public NDArray scale(NDArray loss) {
        requireAttached();
        verdict = Verdict.UNCHECKED; // a new backward: the last step's verdict no longer holds
        return scaler.scale(loss);
    }

    /**
     * Unscales every device's gradients in place and checks them for Inf/NaN; on overflow, the next
     * optimizer step is skipped.
     *
     * @param stepManager a manager closed at the end of the step
     * @return true when the step must be skipped
     */
    public boolean unscaleAndCheck(NDManager stepManager) {
        requireAttached();
        // without scaling or reduction nothing is touched: skip making the gradient handles
        GradientSet gradients =
                scaler.getConfig().isEnabled() || gradientReducer != null
                        ? gradients(stepManager)
                        : new GradientSet();
        if (gradientReducer != null) {
            gradientReducer.reduce(gradients, stepManager);
        }
        boolean overflow = scaler.unscaleAndCheck(gradients, stepManager);
        verdict = overflow ? Verdict.SKIP : Verdict.APPLY;
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
    public void afterBackward(NDManager stepManager) {
        requireAttached();
        pendingBatches++;
        if (pendingBatches < options.getAccumulationSteps()) {
            verdict = Verdict.ACCUMULATE;
            return;
        }
        pendingBatches = 0;
        unscaleAndCheck(stepManager);
        update();
    }

    /**
     * Returns whether the optimizer step after this batch only accumulates gradients.
     *
     * @return true inside an accumulation window
     */
    boolean isAccumulating() {
        return verdict == Verdict.ACCUMULATE;
    }

    /** Moves the loss scale after the step and saves its state into the model's properties. */
    public void update() {
        requireAttached();
        scaler.update();
        trainer.getModel().setProperty(SCALER_STATE_PROPERTY, scaler.state().toString());
    }

    /**
     * Returns whether the optimizer must skip the current step.
     *
     * @return true after an overflow was found in this step's gradients
     * @throws AmpException when this step's gradients were never checked
     */
    public boolean isSkipping() {
        if (verdict == Verdict.UNCHECKED) {
            throw new AmpException(
                    "The optimizer ran before djl-amp checked the gradients: with EasyTrain keep"
                            + " the AmpTrainingListener that Amp.configure adds; in a custom loop"
                            + " call AmpSession.unscaleAndCheck(...) between backward and"
                            + " trainer.step()");
        }
        return verdict == Verdict.SKIP;
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

    /**
     * Tells the session a master weight changed, so its 16-bit casts are stale.
     *
     * @param parameterId the parameter's id
     */
    void weightUpdated(String parameterId) {
        WeightCastCache cache = block.getCastCache();
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
        ParameterStore store = block.getTrainingStore();
        Device[] devices = trainer.getDevices();
        if (trainable == null) {
            // the block's parameters are fixed once built: list the trainable ones once
            trainable = new ArrayList<>();
            for (Pair<String, Parameter> pair : block.getParameters()) {
                if (pair.getValue().requiresGradient()) {
                    trainable.add(pair);
                }
            }
        }
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

    private void requireAttached() {
        if (trainer == null) {
            throw new AmpException(
                    "The AMP session is not attached to a trainer yet: call"
                            + " AmpSession.of(trainer) (EasyTrain does this in onTrainingBegin)");
        }
    }

    /**
     * Returns the model being trained.
     *
     * @return the model
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
    }
}
