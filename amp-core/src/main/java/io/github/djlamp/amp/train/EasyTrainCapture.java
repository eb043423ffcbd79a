package io.github.djlamp.amp.train;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.util.PairList;
import io.github.djlamp.amp.capture.CapturedStep;
import io.github.djlamp.amp.capture.StepBody;
import io.github.djlamp.amp.cast.internal.StepInForward;
import io.github.djlamp.amp.spi.StepGraphs;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code EasyTrain.fit}'s step captured where it can be, with nothing changed in the user's code.
 *
 * <p>DJL runs a batch from separate calls: {@code trainer.forward(data, labels)}, the loss, {@code
 * backward}, the listeners, then {@code trainer.step()}. Under {@code EasyTrain.fit} (and only
 * there: a loop of the user's may step when it likes), the block's training forward with labels
 * runs the whole step instead, through a {@link CapturedStep}: forward, the loss, backward and
 * {@code amp.step()}, captured after its warm-up steps and replayed later. The forward returns the
 * step's predictions; the loss EasyTrain then evaluates is the step's own, on a leaf of its own, so
 * its backward reaches nothing; the listeners hear of the batch after its step, with its
 * predictions and labels; {@code trainer.step()} changes nothing for that batch.
 *
 * <p>Where the step cannot be captured (no graphs on the device: the CPU; a listener of the user's
 * that acts in {@code onTrainingBatch}, which would see the step's end; the session's refusals;
 * {@code -Ddjlamp.capture=off}) nothing changes: EasyTrain's batches run as in DJL, decided once at
 * the first batch.
 */
final class EasyTrainCapture implements StepInForward {

    private static final Logger logger = LoggerFactory.getLogger(EasyTrainCapture.class);
    private static final String EASY_TRAIN = "ai.djl.training.EasyTrain";

    /** Frames between the block's forward and {@code EasyTrain.fit}, with room for wrappers. */
    private static final int FRAMES_TO_FIT = 24;

    private enum Decision {
        UNDECIDED,
        CAPTURING,
        EAGER
    }

    private final AmpSession session;
    private final Trainer trainer;
    private Decision decision = Decision.UNDECIDED;
    private CapturedStep step;
    private String refusal;
    private boolean inStep;
    private boolean stepDone;
    private NDArray stepLoss;

    EasyTrainCapture(AmpSession session, Trainer trainer) {
        this.session = session;
        this.trainer = trainer;
    }

    @Override
    public NDList run(
            ParameterStore store, NDList data, NDList labels, PairList<String, Object> params) {
        if (inStep || decision == Decision.EAGER || !calledByEasyTrainFit()) {
            return null;
        }
        if (decision == Decision.UNDECIDED && !decide(store, params)) {
            return null;
        }
        NDList outputs;
        inStep = true;
        try {
            outputs = step.run(data, labels);
        } finally {
            inStep = false;
        }
        if (step.getState() == CapturedStep.State.EAGER) {
            decision = Decision.EAGER; // the capture did not hold: later batches as in DJL
            refusal = step.getRefusal();
        }
        stepDone = true;
        int predictions = outputs.size() - 1;
        stepLoss = outputs.get(predictions);
        return outputs.subNDList(0, predictions);
    }

    @Override
    public void forwardBegins() {
        stepDone = false;
        stepLoss = null;
    }

    /**
     * The loss {@code EasyTrain} passes to backward after a step the forward ran: the step's loss
     * value on a leaf freed with the batch's labels, whose backward reaches no parameter; null when
     * no such step is waiting for it.
     */
    NDArray takeLossOfCompletedStep(NDList labels) {
        if (stepLoss == null) {
            return null;
        }
        NDArray leaf = stepLoss.stopGradient();
        stepLoss = null;
        leaf.attach(labels.head().getManager());
        leaf.setRequiresGradient(true);
        return leaf;
    }

    /** Whether the last forward completed its batch's step, until the next forward begins. */
    boolean isStepDone() {
        return stepDone;
    }

    /** The captured step, null where none was made (yet): for tests. */
    CapturedStep step() {
        return step;
    }

    /** Why the step is not captured, null while it is or before the first batch decided. */
    String refusal() {
        return refusal;
    }

    /** The epoch ended: the thread gets its stream back, so other threads see every update. */
    void pause() {
        if (step != null) {
            step.pause();
        }
    }

    /** The trainer closed: the graph and its arrays are freed. */
    void close() {
        forwardBegins();
        if (step != null) {
            step.close();
            step = null;
        }
        decision = Decision.EAGER;
    }

    private boolean decide(ParameterStore store, PairList<String, Object> params) {
        decision = Decision.EAGER;
        StepGraphs engineGraphs = session.stepGraphs();
        String why = engineGraphs.whyNot(trainer.getDevices()[0]);
        if (why != null) {
            refusal = why;
            logger.debug("djl-amp does not capture EasyTrain's step: {}", why);
            return false;
        }
        String listeners = BatchListeners.refusal(trainer);
        if (listeners != null) {
            refusal = listeners;
            logger.info("djl-amp does not capture EasyTrain's step: {}", listeners);
            return false;
        }
        CapturedStep made =
                session.captureStep(
                        body(store, params), CapturedStep.DEFAULT_WARM_UP_STEPS, engineGraphs);
        if (made.isEager()) {
            refusal = made.getRefusal(); // logged
            made.close();
            return false;
        }
        step = made;
        decision = Decision.CAPTURING;
        // trainer.step() after a completed step: nothing per parameter; and no copy of each
        // gradient in the steps (LocalParameterServer duplicates them before the update)
        store.setParameterServer(
                new CompletedStepServer(session.getOptimizer(), session), trainer.getDevices());
        return true;
    }

    /** What {@code EasyTrain.trainSplit} runs: the forward, its loss, backward. */
    private StepBody body(ParameterStore store, PairList<String, Object> params) {
        return (data, labels) -> {
            NDList predictions = session.getBlock().forward(store, data, labels, params);
            NDArray loss = trainer.getLoss().evaluate(labels, predictions);
            session.getBackend().backward(loss, loss.onesLike(), false);
            NDList outputs = new NDList(predictions);
            outputs.add(loss);
            return outputs;
        };
    }

    private static boolean calledByEasyTrainFit() {
        return StackWalker.getInstance()
                .walk(frames -> frames.limit(FRAMES_TO_FIT).anyMatch(EasyTrainCapture::isFit));
    }

    private static boolean isFit(StackWalker.StackFrame frame) {
        return EASY_TRAIN.equals(frame.getClassName()) && "fit".equals(frame.getMethodName());
    }
}
