package io.github.djlamp.amp.train;

import ai.djl.metric.Metrics;
import ai.djl.ndarray.NDManager;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.listener.TrainingListenerAdapter;
import io.github.djlamp.amp.cast.ArithmeticShare;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.scale.LossScaler;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Ties mixed precision into {@code EasyTrain.fit}: after backward and before the optimizer (DJL's
 * {@code onTrainingBatch}, the only hook there), one fused unscale-and-check over every device's
 * gradients, one host read of the verdict, and the scale update. Publishes {@value #LOSS_SCALE} and
 * {@value #SKIPPED_STEPS} to the trainer's {@link Metrics} and logs a summary per epoch.
 *
 * <p>When the loss scaler keeps its state on the device (fused optimizer steps), there is no host
 * read per step: the metrics are published at the scaler's host reads (every {@code
 * hostSyncInterval} steps, {@link io.github.djlamp.amp.AmpOptions.Builder#hostSyncInterval}) and at
 * each epoch's end, where the state is read once.
 */
public final class AmpTrainingListener extends TrainingListenerAdapter {

    /** The metric name of the loss scale after each step. */
    public static final String LOSS_SCALE = "amp/lossScale";

    /** The metric name of the running count of skipped steps. */
    public static final String SKIPPED_STEPS = "amp/skippedSteps";

    private static final Logger logger = LoggerFactory.getLogger(AmpTrainingListener.class);

    private final AmpSession session;
    private long epochStartSteps;
    private long epochStartSkipped;
    private float epochMinScale = Float.POSITIVE_INFINITY;
    private float epochMaxScale;
    private int epoch;
    private boolean logging = true;
    private WeakReference<Trainer> announcedTo = new WeakReference<>(null);

    /**
     * Creates the listener.
     *
     * @param session the AMP session it drives
     */
    public AmpTrainingListener(AmpSession session) {
        this.session = session;
    }

    /**
     * Returns the session this listener drives.
     *
     * @return the session
     */
    public AmpSession getSession() {
        return session;
    }

    /** The session of the djl-amp listener among a trainer's, or null when it has none. */
    static AmpSession sessionOf(Trainer trainer) {
        // Trainer does not expose its listeners; notifying them is the one way to meet them
        List<TrainingListener> listeners = new ArrayList<>();
        trainer.notifyListeners(listeners::add);
        for (TrainingListener listener : listeners) {
            if (listener instanceof AmpTrainingListener) {
                return ((AmpTrainingListener) listener).getSession();
            }
        }
        return null;
    }

    /**
     * Turns this listener's INFO lines (the policy when training begins, a summary each epoch) on
     * or off; metrics are published either way. Data-parallel training turns them off on every
     * process but the first.
     *
     * @param logging whether to log
     */
    public void setLogging(boolean logging) {
        this.logging = logging;
    }

    /** {@inheritDoc} */
    @Override
    public void onTrainingBegin(Trainer trainer) {
        session.attach(trainer);
        LossScaler scaler = session.getScaler();
        // DJL's Trainer announces the beginning itself, and loops that follow DJL's examples
        // (TrainTicTacToe) announce it again: one line per trainer
        boolean announced = announcedTo.get() == trainer;
        announcedTo = new WeakReference<>(trainer);
        if (!logging || announced) {
            startEpoch();
            return;
        }
        logger.info(
                "djl-amp: policy {}, loss scaling {}, scale {}, {}; {}",
                session.getPolicyChoice(),
                scaler.getConfig(),
                scaler.getScale(),
                !scaler.getConfig().isEnabled()
                        ? "no overflow check (nothing to read per step)"
                        : !scaler.isStateOnDevice()
                                ? "overflow verdict read on the host each step"
                                : session.hostSyncInterval() == 1
                                        ? "scaler state on the device, read on the host each step"
                                        : "scaler state on the device, read on the host every "
                                                + session.hostSyncInterval()
                                                + " steps",
                session.isFusedOptimizer()
                        ? "fused optimizer step (one launch for all parameters)"
                        : "the optimizer's own per-parameter update");
        String checkpointing = session.getBlock().getTrainingLink().getCheckpoints().describe();
        if (checkpointing != null) {
            logger.info("djl-amp: {}", checkpointing);
        }
        startEpoch();
    }

    /**
     * {@inheritDoc}
     *
     * <p>The check's per-step arrays go on the batch's manager, which {@code EasyTrain} closes
     * after the step. Loops that train without a {@code Batch} (DJL's reinforcement-learning
     * agents: {@code QAgent.trainBatch} notifies with a null batch, then the caller runs {@code
     * trainer.step()}) get a manager of their own for the check, closed once it is done.
     */
    @Override
    public void onTrainingBatch(Trainer trainer, BatchData batchData) {
        // EasyTrain.fit's captured step has checked, stepped and moved the scale
        if (!session.isStepDoneBeforeListeners()) {
            afterBackward(trainer, batchData.getBatch());
        }
        LossScaler scaler = session.getScaler();
        if (!scaler.isMirrorFresh()) {
            return; // the state is on the device: reported at its next host read
        }
        report(trainer, scaler);
    }

    private void afterBackward(Trainer trainer, Batch batch) {
        if (batch != null) {
            session.afterBackward(batch.getManager());
            return;
        }
        try (NDManager stepManager = trainer.getManager().newSubManager()) {
            session.afterBackward(stepManager);
        }
    }

    private void report(Trainer trainer, LossScaler scaler) {
        float scale = scaler.getScale();
        epochMinScale = Math.min(epochMinScale, scale);
        epochMaxScale = Math.max(epochMaxScale, scale);
        Metrics metrics = trainer.getMetrics();
        if (metrics != null) {
            metrics.addMetric(LOSS_SCALE, scale);
            metrics.addMetric(SKIPPED_STEPS, scaler.getSkippedSteps());
        }
    }

    /** {@inheritDoc} */
    @Override
    public void onEpoch(Trainer trainer) {
        session.pauseCapture();
        session.flushAccumulation();
        LossScaler scaler = session.getScaler();
        if (!scaler.isMirrorFresh()) {
            session.syncToHost(); // one read at the epoch's end
            report(trainer, scaler);
        }
        long steps = scaler.getSteps() - epochStartSteps;
        long skipped = scaler.getSkippedSteps() - epochStartSkipped;
        epoch++;
        if (!logging) {
            startEpoch();
            return;
        }
        if (scaler.getConfig().isEnabled()) {
            logger.info(
                    "djl-amp epoch {}: {} steps, {} skipped; loss scale {} (range {} to {}); {}",
                    epoch,
                    steps,
                    skipped,
                    scaler.getScale(),
                    epochMinScale,
                    epochMaxScale,
                    arithmetic(trainer));
        } else {
            logger.info(
                    "djl-amp epoch {}: {} steps without loss scaling; {}",
                    epoch,
                    steps,
                    arithmetic(trainer));
        }
        startEpoch();
    }

    /** What the epoch computed in: the share of its arithmetic in 16 bits, as counted. */
    private String arithmetic(Trainer trainer) {
        if (session.getPolicy().getComputePrecision() == Precision.FP32) {
            return "computed in fp32";
        }
        ArithmeticShare share = session.getBlock().getArithmeticShare(trainer.getDevices()[0]);
        return share == null
                ? "computed in " + session.getPolicy().getComputePrecision().canonicalName()
                : share.toString();
    }

    /** {@inheritDoc} */
    @Override
    public void onTrainingEnd(Trainer trainer) {
        session.detach(trainer);
    }

    private void startEpoch() {
        LossScaler scaler = session.getScaler();
        epochStartSteps = scaler.getSteps();
        epochStartSkipped = scaler.getSkippedSteps();
        epochMinScale = Float.POSITIVE_INFINITY;
        epochMaxScale = 0;
    }
}
