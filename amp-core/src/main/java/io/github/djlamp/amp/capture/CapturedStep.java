package io.github.djlamp.amp.capture;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.spi.StepGraph;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A custom loop's training step captured once into a graph and replayed for every later batch of
 * the same shapes: one launch a step instead of one per operation, where the host, not the device,
 * bounds the step ({@code torch.cuda.make_graphed_callables} for a whole step). Made by {@code
 * AmpSession.captureStep(body)}:
 *
 * <pre>{@code
 * try (CapturedStep step = amp.captureStep((data, labels) -> {
 *         try (GradientCollector collector = trainer.newGradientCollector()) {
 *             NDArray loss = trainer.getLoss().evaluate(labels, trainer.forward(data));
 *             collector.backward(loss);
 *             return new NDList(loss);
 *         }
 *     })) {
 *     for (Batch batch : trainer.iterateDataset(dataset)) {
 *         NDList out = step.run(batch.getData(), batch.getLabels()); // body, then amp.step()
 *         float loss = out.head().getFloat(); // a read outside the step: allowed
 *         batch.close();
 *     }
 * }
 * }</pre>
 *
 * <p>The first {@link #DEFAULT_WARM_UP_STEPS} steps run eagerly (kernel checks, compiled forwards
 * and optimizer state settle there); the next is captured and run; every later one copies its batch
 * into the arrays the graph reads and replays it. A replay runs none of the body's Java code: the
 * body must do the same device work at every step, and read nothing on the host (read what it
 * returns, after {@link #run}).
 *
 * <p>It refuses rather than replays wrong: where the session's step cannot be captured (several
 * devices, a loss scale read on the host, a per-parameter update, gradient accumulation,
 * checkpointing, a gradient reducer), where the engine has no graphs (the CPU), and after a capture
 * the device's runtime invalidated (a host read or a synchronization in the body), every step runs
 * eagerly; a batch of other shapes (the last, partial one) runs eagerly on its own arrays. Each is
 * said once, in the log and by {@link #getRefusal()}. {@code -Ddjlamp.capture=off} runs every step
 * eagerly. The first replay is checked against the same batch run eagerly from the same state; one
 * that differs ends capturing, with a WARN.
 */
public final class CapturedStep implements AutoCloseable {

    /** The system property that turns capture off ({@code -Ddjlamp.capture=off}). */
    public static final String PROPERTY = "djlamp.capture";

    /** Eager steps before the capture, as {@code make_graphed_callables} runs. */
    public static final int DEFAULT_WARM_UP_STEPS = 3;

    private static final Logger logger = LoggerFactory.getLogger(CapturedStep.class);

    /** Where the step stands. */
    public enum State {
        /** Eager steps on the arrays the graph will read, before the capture. */
        WARMING_UP,
        /** Captured: steps of the captured shapes replay the graph. */
        REPLAYING,
        /** Every step runs eagerly: {@link #getRefusal()} says why. */
        EAGER
    }

    private final CaptureHooks hooks;
    private final EagerStep eagerStep;
    private final int warmUpSteps;
    private final StaticBatch statics = new StaticBatch();
    private final HeldState heldState = new HeldState();
    private final CaptureStream stream;
    private State state = State.WARMING_UP;
    private String refusal;
    private boolean started;
    private boolean closed;
    private NDManager manager;
    private NDManager lastOutputs;
    private NDList outputs;
    private StepGraph graph;
    private int warmedUp;
    private long replays;
    private int captures;
    private boolean checkFirstReplay;

    /**
     * Creates a captured step; {@code AmpSession.captureStep} does.
     *
     * @param hooks the session's side
     * @param body the step's forward, loss and backward
     * @param warmUpSteps eager steps before the capture, at least 1
     * @throws IllegalArgumentException when {@code warmUpSteps} is below 1
     */
    public CapturedStep(CaptureHooks hooks, StepBody body, int warmUpSteps) {
        this.hooks = Objects.requireNonNull(hooks, "hooks");
        this.eagerStep =
                new EagerStep(
                        hooks,
                        Objects.requireNonNull(
                                body,
                                "captureStep needs the step's body, got null: pass (data, labels)"
                                        + " -> { forward, loss and backward in a"
                                        + " GradientCollector; return new NDList(loss) }"));
        if (warmUpSteps < 1) {
            throw new IllegalArgumentException(
                    "captureStep needs at least 1 warm-up step before the capture, got "
                            + warmUpSteps
                            + ": the first step checks kernels and creates optimizer state,"
                            + " which a capture cannot hold");
        }
        this.warmUpSteps = warmUpSteps;
        this.stream = new CaptureStream(hooks);
    }

    /**
     * Runs one step on a batch: the body, then {@code amp.step()}; eagerly, captured, or replayed
     * (see the class).
     *
     * @param batchData the batch's data, on the trainer's device
     * @param batchLabels the batch's labels, on the trainer's device
     * @return what the body returned; for a captured or replayed step the same arrays every time,
     *     overwritten by the next step (copy what must be kept; never close them)
     * @throws IllegalStateException when the step was closed
     */
    public NDList run(NDList batchData, NDList batchLabels) {
        requireOpen("run");
        Objects.requireNonNull(batchData, "CapturedStep.run needs the batch's data, got null");
        Objects.requireNonNull(batchLabels, "CapturedStep.run needs the batch's labels, got null");
        if (!started) {
            start();
        } else if (!stream.isEntered() && state != State.EAGER) {
            stream.enter(); // after a pause
        }
        if (stream.isEntered()) {
            hooks.graphs().awaitOtherThreads(hooks.device());
        }
        if (state == State.EAGER) {
            return eager(batchData, batchLabels);
        }
        if (!statics.take(hooks, manager, batchData, batchLabels)) {
            return eager(batchData, batchLabels);
        }
        if (state == State.REPLAYING && !heldState.isHeld(hooks)) {
            return captureAgain();
        }
        if (state == State.REPLAYING && checkFirstReplay) {
            return checkedReplay();
        }
        if (state == State.REPLAYING) {
            graph.replay();
            replays++;
            hooks.afterReplay();
            hooks.afterStep();
            return outputs;
        }
        if (warmedUp < warmUpSteps) {
            warmedUp++;
            NDList result = stepOnStatics(nextOutputs());
            hooks.afterStep();
            return result;
        }
        return capture();
    }

    /**
     * Decides, before the first step, whether steps will be captured, and returns whether every
     * step runs eagerly ({@link #getRefusal()} says why).
     *
     * @return true when the session's step or the device cannot be captured, or a capture failed
     * @throws IllegalStateException when the step was closed
     */
    public boolean isEager() {
        requireOpen("isEager");
        if (!started) {
            start();
        }
        return state == State.EAGER;
    }

    /**
     * Returns where the step stands.
     *
     * @return the state
     */
    public State getState() {
        return state;
    }

    /**
     * Returns why every step runs eagerly.
     *
     * @return the reason, or null while steps are captured or about to be
     */
    public String getRefusal() {
        return refusal;
    }

    /**
     * Returns how many steps replayed the graph.
     *
     * @return the replays, the captured step itself not counted
     */
    public long getReplays() {
        return replays;
    }

    /**
     * Returns how many times the step was captured: more than once where the arrays a graph reads
     * were replaced between steps (state loaded), so that the graph was captured again.
     *
     * @return the captures that held
     */
    public int getCaptures() {
        return captures;
    }

    /**
     * Gives the thread its stream back until the next {@link #run}, every step so far complete on
     * the device: other threads then see the weights the steps updated ({@code EasyTrain.fit}'s
     * captured step pauses at each epoch's end). The graph and its arrays are kept.
     */
    public void pause() {
        if (!closed) {
            stream.leave();
        }
    }

    /**
     * Frees the graph and the arrays it reads and writes (the arrays {@link #run} returned from it
     * included), and gives the thread its stream back.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (!started) {
            return;
        }
        try {
            stream.leave();
        } finally {
            if (graph != null) {
                graph.close();
                graph = null;
            }
            manager.close(); // the statics, the outputs and the last warm-up's outputs
        }
    }

    private void start() {
        started = true;
        manager = hooks.manager().newSubManager(hooks.device());
        manager.setName("djl-amp captured step");
        refusal = CaptureRefusal.first(hooks);
        if (refusal != null) {
            state = State.EAGER;
            logger.info("djl-amp does not capture the training step: {}", refusal);
            return;
        }
        stream.enter();
    }

    private void requireOpen(String method) {
        if (closed) {
            throw new IllegalStateException(
                    "CapturedStep."
                            + method
                            + " after close(): make a new one with"
                            + " amp.captureStep(body)");
        }
    }

    private NDList eager(NDList batchData, NDList batchLabels) {
        NDList result = eagerStep.run(batchData, batchLabels);
        if (stream.isEntered()) {
            hooks.afterStep();
        }
        return result;
    }

    private NDList stepOnStatics(NDManager keep) {
        return eagerStep.onStatics(statics, manager, keep);
    }

    /** A manager for the next warm-up step's outputs, the last one's freed. */
    private NDManager nextOutputs() {
        if (lastOutputs != null) {
            lastOutputs.close();
        }
        lastOutputs = manager.newSubManager();
        return lastOutputs;
    }

    private NDList capture() {
        NDList[] made = new NDList[1];
        StepGraph captured;
        hooks.beforeCapture();
        try {
            captured = hooks.graphs().capture(hooks.device(), () -> runRegion(made));
        } catch (RuntimeException e) {
            return giveUp("the step failed inside the capture (" + e + ")", e);
        }
        if (captured == null) {
            return giveUp(
                    "the device's runtime invalidated the capture: the body reads a value on the"
                            + " host or synchronizes (read what it returns after run(...)"
                            + " instead)",
                    null);
        }
        graph = captured;
        outputs = made[0]; // the graph writes them at every replay
        state = State.REPLAYING;
        checkFirstReplay = captures == 0 && FirstReplayCheck.wanted(hooks);
        captures++;
        heldState.remember(hooks);
        hooks.afterStep();
        if (captures == 1) {
            logger.info(
                    "djl-amp captured the training step after {} warm-up steps ({}): later"
                            + " batches of these shapes replay it",
                    warmedUp,
                    statics.signature());
        } else {
            logger.debug("djl-amp captured the training step again ({})", statics.signature());
        }
        return outputs;
    }

    /** The first replay, checked against the same batch run eagerly ({@link FirstReplayCheck}). */
    private NDList checkedReplay() {
        checkFirstReplay = false;
        replays++;
        FirstReplayCheck.Outcome checked =
                FirstReplayCheck.run(hooks, manager, graph, () -> stepOnStatics(nextOutputs()));
        hooks.afterStep();
        if (checked.mismatch() != null) {
            stopCapturing("its first replay is not the step (" + checked.mismatch() + ")", null);
        } else if (checked.unchecked() != null) {
            stopCapturing(checked.unchecked(), null);
        }
        return checked.outputs();
    }

    /** Arrays the graph holds were replaced (new scheduled rates, state loaded): capture anew. */
    private NDList captureAgain() {
        logger.info(
                "djl-amp captures the training step again: arrays the graph reads were replaced"
                        + " since it was captured (a learning-rate schedule's window of rates"
                        + " refreshed, or optimizer, scaler or parameter state loaded)");
        graph.close();
        graph = null;
        outputs.close();
        outputs = null;
        return capture();
    }

    /**
     * The captured region: the step on the static arrays, its results kept for the replays. A
     * stand-in that runs the region again instead of replaying it (tests, without a GPU) finds its
     * results where a replay leaves them.
     */
    private void runRegion(NDList[] made) {
        if (made[0] == null && outputs == null) {
            made[0] = stepOnStatics(manager);
            return;
        }
        try (NDManager rerun = manager.newSubManager()) {
            hooks.copy(outputs, stepOnStatics(rerun));
        }
    }

    /** A capture that did not hold: the step runs again eagerly, and so does every later one. */
    private NDList giveUp(String why, RuntimeException cause) {
        hooks.abandonStep();
        NDList result = stepOnStatics(nextOutputs());
        hooks.afterStep();
        stopCapturing(why, cause);
        return result;
    }

    /** Every later step runs eagerly: the graph freed, the thread's stream given back. */
    private void stopCapturing(String why, RuntimeException cause) {
        state = State.EAGER;
        refusal = why;
        if (cause != null) {
            logger.warn("djl-amp runs every later step eagerly: {}", why, cause);
        } else {
            logger.warn("djl-amp runs every later step eagerly: {}", why);
        }
        if (graph != null) {
            graph.close();
            graph = null;
        }
        stream.leave();
    }
}
