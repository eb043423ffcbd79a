package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Parameter;
import ai.djl.util.Pair;
import io.github.djlamp.amp.capture.CaptureHooks;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.spi.StepGraphs;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A session's side of a captured step: what cannot be replayed, the step's end, and what a replay
 * leaves for the host (the scaler's step count and its scheduled reads).
 */
final class SessionCapture implements CaptureHooks {

    private final AmpSession session;
    private final AttachedTrainer attached;
    private final SessionSettings settings;
    private final LossScalingOptimizer optimizer;
    private final TrainableGradients trainable;
    private final StepGraphs graphs;

    /** With {@code graphs} null, the engine's graphs. */
    SessionCapture(
            AmpSession session,
            AttachedTrainer attached,
            SessionSettings settings,
            LossScalingOptimizer optimizer,
            TrainableGradients trainable,
            StepGraphs graphs) {
        this.session = session;
        this.attached = attached;
        this.settings = settings;
        this.optimizer = optimizer;
        this.trainable = trainable;
        this.graphs = graphs != null ? graphs : attached.backend().stepGraphs();
    }

    @Override
    public Device device() {
        return attached.trainer().getDevices()[0];
    }

    @Override
    public NDManager manager() {
        return attached.trainer().getManager();
    }

    @Override
    public StepGraphs graphs() {
        return graphs;
    }

    @Override
    public void copy(NDList destinations, NDList sources) {
        attached.backend().copy(destinations, sources);
    }

    @Override
    public List<String> refusals() {
        List<String> refusals = new ArrayList<>();
        int devices = attached.trainer().getDevices().length;
        if (devices > 1) {
            refusals.add(
                    "the trainer has "
                            + devices
                            + " devices, and a graph replays one device's work (train with one"
                            + " device per process: amp-distributed)");
        }
        if (!attached.fused()) {
            refusals.add(
                    "the optimizer step is DJL's per-parameter update, which reads the loss"
                            + " scaler's verdict on the host every step (DJL's Sgd, Adam, AdamW"
                            + " or Nag with a fixed learning rate and"
                            + " AmpOptions.builder().fusedOptimizer(FusedOptimizer.ON) fuse it)");
        }
        if (settings.getAccumulationSteps() > 1) {
            refusals.add(
                    "gradients accumulate over "
                            + settings.getAccumulationSteps()
                            + " batches, so steps differ (AmpOptions.builder()"
                            + ".accumulationSteps(1) to capture)");
        }
        if (session.getBlock().getTrainingLink().getCheckpoints().getSetting().isEnabled()) {
            refusals.add(
                    "activation checkpointing recomputes segments from the host after backward"
                            + " (Checkpointing.none() to capture)");
        }
        if (trainable.hasReducer()) {
            refusals.add(
                    "a gradient reducer combines gradients across processes between backward and"
                            + " the step");
        }
        return refusals;
    }

    @Override
    public void stateArrays(List<Object> into) {
        parameterArrays(into); // BatchNorm's statistics too: the graph updates them in place
        stepState(into);
        FusedUpdate fused = fusedUpdate();
        NDArray rates = fused == null ? null : fused.rateTable();
        if (rates != null) {
            into.add(rates); // a refreshed window of scheduled rates: captured again
        }
    }

    @Override
    public void checkedArrays(List<NDArray> into) {
        parameterArrays(into);
        stepState(into);
    }

    /** Every parameter's array, trained or not (BatchNorm's running statistics). */
    private void parameterArrays(List<? super NDArray> into) {
        for (Pair<String, Parameter> pair : trainable.allParameters()) {
            Parameter parameter = pair.getValue();
            if (parameter.isInitialized()) {
                into.add(parameter.getArray());
            }
        }
    }

    /** The scaler's state, and the fused optimizer's counts and buffers. */
    private void stepState(List<? super NDArray> into) {
        attached.scaler().deviceStateArrays(into);
        FusedUpdate fused = fusedUpdate();
        if (fused != null) {
            fused.counter().arrays(into);
            for (NDArray[] buffers : fused.buffers().values()) {
                Collections.addAll(into, buffers);
            }
        }
    }

    @Override
    public RandomDraws randomDraws() {
        return RandomBlocks.find(session.getBlock());
    }

    @Override
    public void begin() {
        attached.scaler().deferScheduledReads(true);
    }

    @Override
    public void step() {
        session.step();
    }

    @Override
    public void afterReplay() {
        attached.scaler().countReplayedStep();
        FusedUpdate fused = fusedUpdate();
        if (fused != null) {
            fused.replayed();
        }
    }

    @Override
    public void afterStep() {
        LossScaler scaler = attached.scaler();
        if (scaler.takeDueRead()) {
            attached.syncToHost();
        }
        FusedUpdate fused = fusedUpdate();
        if (fused != null) {
            fused.refreshRatesIfDue(attached.backend());
        }
    }

    private FusedUpdate fusedUpdate() {
        return optimizer == null ? null : optimizer.fusedUpdate();
    }

    @Override
    public void beforeCapture() {
        attached.scaler().beginCapturedStep();
    }

    @Override
    public void abandonStep() {
        attached.scaler().abandonStep();
        session.abandonStep();
    }

    @Override
    public void end() {
        attached.scaler().deferScheduledReads(false);
    }
}
