package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.ParameterTracker;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.FusedOptimizerStep;
import io.github.djlamp.amp.spi.GradientAdjustment;
import io.github.djlamp.amp.spi.LearningRate;
import io.github.djlamp.amp.spi.UpdateCounter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One fused optimizer launch for every parameter of a step, skipped on the device when the step's
 * gradients overflowed, in place of DJL's one native update per parameter.
 *
 * <p>Covers every optimizer {@link FusedOptimizerKinds} knows, on one device, with any {@link
 * Tracker} as learning rate (a schedule is looked up on the device by DJL's update count, {@link
 * FusedUpdateCount}, {@link LearningRateWindow}), and DJL's weightDecays, rescaleGrad, clipGrad and
 * beginNumUpdate, which every DJL optimizer has; the optimizer's kind supplies its kernel, its own
 * settings and its buffers. {@link #plan(Optimizer)} says why anything else keeps DJL's own
 * per-parameter update. The settings are read from DJL's private fields (DJL exposes none of them).
 * The state (the kind's buffers, the update count) is this class's own: once fused, always fused.
 */
final class FusedUpdate {

    private static final Logger logger = LoggerFactory.getLogger(FusedUpdate.class);

    /** DJL's fixed learning rate tracker, a package-private class. */
    private static final Class<?> FIXED_TRACKER = Tracker.fixed(1f).getClass();

    private final FusedOptimizerKind.Kernel kernel;
    private final int bufferCount;
    private final float firstBufferToDjl;
    private final float weightDecay;
    private final GradientAdjustment adjustment;
    private final LearningRateWindow schedule;

    /** The rate of the next launch: the fixed one, or the schedule's window on the device. */
    private LearningRate rate;

    private final Map<String, NDArray[]> state = new HashMap<>();
    private final FusedUpdateCount counter;
    private final Set<String> seenThisStep = new HashSet<>();
    private long forwardsAtLaunch = -1;

    private FusedUpdate(
            FusedOptimizerKind kind,
            Optimizer optimizer,
            ParameterTracker tracker,
            GradientAdjustment adjustment,
            int beginNumUpdate) {
        this.kernel = kind.kernel(optimizer);
        this.bufferCount = kind.stateFields(optimizer).size();
        this.weightDecay = (float) DjlOptimizers.read(optimizer, Optimizer.class, "weightDecays");
        this.adjustment = adjustment;
        this.counter = new FusedUpdateCount(beginNumUpdate);
        float fixedRate = Float.NaN;
        if (tracker.getClass() == FIXED_TRACKER) {
            fixedRate = tracker.getNewValue("", 1);
            schedule = null;
            rate = LearningRate.fixed(fixedRate);
        } else {
            schedule = new LearningRateWindow((Tracker) tracker, beginNumUpdate);
        }
        this.firstBufferToDjl = kind.firstBufferToDjl(fixedRate);
    }

    /**
     * Returns the fused update equivalent to {@code optimizer}, or null (logged with the reason)
     * when its settings cannot be expressed by the fused kernels.
     *
     * @param optimizer DJL's optimizer
     * @return the fused update, or null
     */
    static FusedUpdate plan(Optimizer optimizer) {
        String reason = unsupported(optimizer);
        if (reason != null) {
            logger.info(
                    "djl-amp keeps {}'s per-parameter update (one host read per step): {}",
                    optimizer.getClass().getSimpleName(),
                    reason);
            return null;
        }
        try {
            ParameterTracker tracker =
                    (ParameterTracker) DjlOptimizers.read(optimizer, "learningRateTracker");
            int begin = (int) DjlOptimizers.read(optimizer, Optimizer.class, "beginNumUpdate");
            GradientAdjustment adjustment =
                    new GradientAdjustment(
                            (float) DjlOptimizers.read(optimizer, Optimizer.class, "rescaleGrad"),
                            (float) DjlOptimizers.read(optimizer, Optimizer.class, "clipGrad"));
            return new FusedUpdate(
                    FusedOptimizerKinds.of(optimizer), optimizer, tracker, adjustment, begin);
        } catch (RuntimeException e) {
            logger.info(
                    "djl-amp keeps {}'s per-parameter update: its settings could not be read ({})",
                    optimizer.getClass().getSimpleName(),
                    e.toString());
            return null;
        }
    }

    private static String unsupported(Optimizer optimizer) {
        if (FusedOptimizerKinds.of(optimizer) == null) {
            return "only DJL's " + FusedOptimizerKinds.names() + " have fused versions";
        }
        try {
            if (!(DjlOptimizers.read(optimizer, "learningRateTracker") instanceof Tracker)) {
                return "the learning rate tracker gives each parameter its own rate (a"
                        + " ParameterTracker that is not a Tracker)";
            }
        } catch (RuntimeException e) {
            return "its settings could not be read (" + e + ")";
        }
        return null;
    }

    /**
     * Runs the fused step for every parameter at the first call of a step; later calls of the same
     * step do nothing. DJL calls the optimizer once per parameter of its store per step (which may
     * include parameters no longer in the tree, a replaced head's), so a call starts a new step
     * when a training forward pass ran since the last launch (also when the trained layers changed
     * in between), or when its parameter was seen already (a step with no forward pass). (No
     * counter of the session or scaler serves: EasyTrain moves the scale before the optimizer step,
     * a custom loop and the epoch's flush after it, and a bf16 custom loop calls {@code
     * trainer.step()} with no scaler call at all.)
     *
     * @param session the session, for the parameters, the backend and the overflow flag
     * @param device the device of the weights
     * @param parameterId the parameter DJL is updating
     */
    void update(AmpSession session, Device device, String parameterId) {
        long forwards = session.getBlock().getTrainingLink().getTrainingForwardCount();
        boolean newStep = forwards != forwardsAtLaunch || seenThisStep.contains(parameterId);
        if (!newStep) {
            seenThisStep.add(parameterId);
            return;
        }
        seenThisStep.clear();
        seenThisStep.add(parameterId);
        forwardsAtLaunch = forwards;
        AmpBackend backend = session.getBackend();
        NDArray foundInf = session.getScaler().getFoundInfArray();
        ParameterStore store = session.getBlock().getTrainingLink().getTrainingStore();
        try (NDManager scope = foundInf.getManager().newSubManager(device)) {
            NDList weights = new NDList();
            NDList grads = new NDList();
            NDList[] buffers = new NDList[bufferCount];
            for (int b = 0; b < bufferCount; b++) {
                buffers[b] = new NDList();
            }
            List<String> ids = new ArrayList<>();
            for (Pair<String, Parameter> pair : session.trainableParameters()) {
                Parameter parameter = pair.getValue();
                if (!parameter.isInitialized()) {
                    continue;
                }
                NDArray weight =
                        store != null
                                ? store.getValue(parameter, device, true)
                                : parameter.getArray();
                NDArray grad = weight.getGradient();
                grad.attach(scope);
                weights.add(weight);
                grads.add(grad);
                ids.add(parameter.getId());
                NDArray[] own = state.computeIfAbsent(parameter.getId(), k -> newState(weight));
                for (int b = 0; b < bufferCount; b++) {
                    buffers[b].add(own[b]);
                }
            }
            if (weights.isEmpty()) {
                return;
            }
            // lives as long as the buffers, on the model's manager
            UpdateCounter count = counter.forLaunch(ids, weights.get(0).getManager(), device);
            refreshRates(backend);
            FusedOptimizerStep.Builder step =
                    FusedOptimizerStep.builder(kernel.name())
                            .settings(kernel.settings())
                            .parameters(weights, grads)
                            .weightDecay(weightDecay)
                            .learningRate(rate)
                            .adjustment(adjustment)
                            .counter(count)
                            .foundInf(foundInf);
            for (NDList oneBufferPerWeight : buffers) {
                step.state(oneBufferPerWeight);
            }
            backend.fusedStep(step.build());
            if (schedule != null) {
                schedule.launched();
            }
        }
    }

    /**
     * Before a launch with a schedule: when the launch may run past the window of rates on the
     * device, one host read of the update count and a new window.
     */
    private void refreshRates(AmpBackend backend) {
        if (schedule == null || !schedule.needsRefresh()) {
            return;
        }
        NDArray count = counter.count();
        float[] window = schedule.refresh(FusedUpdateCount.read(backend, count));
        NDManager owner = count.getManager();
        if (rate != null) {
            rate.getValues().close();
        }
        // made on the count's device directly, owned like the count
        try (NDManager onDevice = owner.newSubManager(count.getDevice())) {
            NDArray rates = onDevice.create(window);
            rates.attach(owner);
            rate = LearningRate.perUpdateCount(rates, schedule.first());
        }
    }

    /**
     * A captured step's launch was replayed: with a schedule, the window counts it, as a launch's
     * Java code does.
     */
    void replayed() {
        if (schedule != null) {
            schedule.launched();
        }
    }

    /**
     * Between captured steps: a window of rates the next launch may run past is refreshed now (one
     * host read of the update count), outside any capture. The new rates are a new array, so a
     * graph that read the old one is captured again ({@link #rateTable()}).
     *
     * @param backend the engine layer
     */
    void refreshRatesIfDue(AmpBackend backend) {
        if (counter.count() != null) {
            refreshRates(backend);
        }
    }

    /** The device's window of scheduled rates a launch reads, or null with a fixed rate. */
    NDArray rateTable() {
        return schedule == null || rate == null ? null : rate.getValues();
    }

    /** The buffers of one parameter (SGD's momentum, Adam's two moments, ...); empty when none. */
    NDList state(String parameterId) {
        NDArray[] buffers = state.get(parameterId);
        return buffers == null ? new NDList() : new NDList(buffers);
    }

    /** DJL's update count on the device, or null before the first step. */
    NDArray stepCount() {
        return counter.count();
    }

    /** Every parameter's buffers by parameter id, as they are used (not copies). */
    Map<String, NDArray[]> buffers() {
        return state;
    }

    /** Puts saved buffers in place of a parameter's own, freeing those. */
    void putBuffers(String parameterId, NDArray[] buffers) {
        NDArray[] old = state.put(parameterId, buffers);
        if (old != null) {
            for (NDArray array : old) {
                array.close();
            }
        }
    }

    /** The number of buffers of each parameter, as many as DJL's optimizer keeps. */
    int bufferCount() {
        return bufferCount;
    }

    /**
     * The factor from this path's first buffer to DJL's ({@link
     * FusedOptimizerKind#firstBufferToDjl}): a fused SGD with a fixed rate keeps the rate out of
     * its momentum, where DJL keeps it in.
     */
    float momentumToDjl() {
        return firstBufferToDjl;
    }

    /** The device update count: restored from a saved state before the first step. */
    FusedUpdateCount counter() {
        return counter;
    }

    private NDArray[] newState(NDArray weight) {
        NDArray[] buffers = new NDArray[bufferCount()];
        for (int i = 0; i < buffers.length; i++) {
            buffers[i] = weight.zerosLike();
        }
        return buffers;
    }
}
