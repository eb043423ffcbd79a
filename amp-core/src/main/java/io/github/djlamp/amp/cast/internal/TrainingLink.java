package io.github.djlamp.amp.cast.internal;

import ai.djl.Device;
import ai.djl.ndarray.NDList;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * What a {@code MixedPrecisionBlock} shares with djl-amp's trainer glue and with nothing else: what
 * its training forward passes leave behind (the trainer's parameter store, their count, the version
 * of the tree they ran, the step's weight casts) and what the glue asks of them (running statistics
 * copied before each step, an action before the model is saved).
 *
 * <p>Reached through {@code MixedPrecisionBlock.getTrainingLink()}; this package is not part of
 * djl-amp's API. Each block has one link for its lifetime; its fields are written by forward passes
 * and read by the glue between them.
 */
public final class TrainingLink {

    private final Supplier<WeightCastCache> castCache;
    private final CheckpointControl checkpoints;
    private final AtomicLong trainingForwards = new AtomicLong();
    private volatile ParameterStore trainingStore;
    private volatile BufferSnapshot bufferSnapshot;
    private volatile int treeVersion;
    private volatile Runnable beforeSave;
    private volatile StepInForward stepInForward;
    private volatile Consumer<ParameterStore> nextTrainingForward;
    private final Runnable afterStep;

    /**
     * Creates the link of one block.
     *
     * @param castCache where the block's weight cast cache is found (null before its first forward)
     * @param checkpoints the block's activation checkpointing
     */
    public TrainingLink(Supplier<WeightCastCache> castCache, CheckpointControl checkpoints) {
        this(castCache, checkpoints, () -> {});
    }

    /**
     * Creates the link of one block.
     *
     * @param castCache where the block's weight cast cache is found (null before its first forward)
     * @param checkpoints the block's activation checkpointing
     * @param afterStep what the block does after each optimizer step (gives back the memory its
     *     kernel checks freed)
     */
    public TrainingLink(
            Supplier<WeightCastCache> castCache,
            CheckpointControl checkpoints,
            Runnable afterStep) {
        this.castCache = castCache;
        this.checkpoints = checkpoints;
        this.afterStep = afterStep;
    }

    /**
     * Sets what runs a whole training step from a training forward with labels, or null for
     * nothing.
     *
     * @param step the step, or null
     */
    public void setStepInForward(StepInForward step) {
        stepInForward = step;
    }

    /**
     * A forward begins: runs the step a training forward with labels begins, where one is set and
     * takes it.
     *
     * @param store the trainer's parameter store
     * @param data the batch's data
     * @param labels the batch's labels, null for a forward without them
     * @param params the forward's parameters
     * @return the outputs of a step that ran, or null to run the forward as usual
     */
    public NDList forwardBegins(
            ParameterStore store, NDList data, NDList labels, PairList<String, Object> params) {
        StepInForward step = stepInForward;
        if (step == null) {
            return null;
        }
        step.forwardBegins();
        return labels == null ? null : step.run(store, data, labels, params);
    }

    /** Runs the block's after-step action: the trainer glue calls it after each update. */
    public void afterStep() {
        afterStep.run();
    }

    /**
     * Returns the block's activation checkpointing: applied at configuration, recomputed after each
     * backward.
     *
     * @return the checkpointing
     */
    public CheckpointControl getCheckpoints() {
        return checkpoints;
    }

    /**
     * Returns the cast cache, or null before the first forward.
     *
     * @return the weight cast cache
     */
    public WeightCastCache getCastCache() {
        return castCache.get();
    }

    /**
     * Returns the parameter store of the last training forward: the trainer's own, through which
     * every device's copy of every parameter (and its gradient) is reached.
     *
     * @return the store, or null before the first training forward
     */
    public ParameterStore getTrainingStore() {
        return trainingStore;
    }

    /**
     * Returns a number that changes each time a forward pass finds that the user changed the
     * wrapped tree (a new head after {@code removeLastBlock()} and {@code add(...)}), so that what
     * lists the tree's parameters lists them again.
     *
     * @return the version of the tree the last forward ran
     */
    public int getTreeVersion() {
        return treeVersion;
    }

    /**
     * Returns how many training forward passes the block has run: new gradients can only have come
     * from one of them.
     *
     * @return the count of forward passes with {@code training} true
     */
    public long getTrainingForwardCount() {
        return trainingForwards.get();
    }

    /**
     * Makes every training forward copy the running statistics (BatchNorm) first, so that a step
     * skipped for overflow can restore them: the trainer glue turns this on whenever steps can be
     * skipped.
     *
     * @return the snapshot the forward passes fill
     */
    public BufferSnapshot enableBufferSnapshots() {
        if (bufferSnapshot == null) {
            bufferSnapshot = new BufferSnapshot();
        }
        return bufferSnapshot;
    }

    /**
     * Sets what runs when {@code Model.save} starts writing the block: the trainer glue writes the
     * current loss scaler state into the model's properties there, so that a save made between the
     * scaler's periodic host reads carries the current state.
     *
     * @param action what to run, or null for nothing
     */
    public void setBeforeSave(Runnable action) {
        beforeSave = action;
    }

    /**
     * Records a training forward pass, before it runs: counts it, keeps its store and copies the
     * running statistics when snapshots are on.
     *
     * @param store the trainer's parameter store the pass was given
     * @param block the wrapped block, whose running statistics are copied
     * @param device the device of the pass
     * @param backend the engine layer that copies
     */
    public void recordTrainingForward(
            ParameterStore store, Block block, Device device, AmpBackend backend) {
        trainingForwards.incrementAndGet();
        trainingStore = store;
        Consumer<ParameterStore> next = nextTrainingForward;
        if (next != null) {
            nextTrainingForward = null;
            next.accept(store);
        }
        BufferSnapshot snapshot = bufferSnapshot;
        if (snapshot != null) {
            snapshot.take(store, block, device, backend);
        }
    }

    /**
     * Hands the store of the next training forward pass to {@code action}, once (a pass running on
     * another thread meanwhile may hand it too).
     *
     * @param action what to tell, or null for nothing
     */
    public void onNextTrainingForward(Consumer<ParameterStore> action) {
        nextTrainingForward = action;
    }

    /** Notes that the user changed the wrapped tree: what lists its parameters lists them again. */
    public void treeChanged() {
        treeVersion++;
        BufferSnapshot snapshot = bufferSnapshot;
        if (snapshot != null) {
            snapshot.forgetTree();
        }
    }

    /** Runs the before-save action, if one is set. */
    public void runBeforeSave() {
        Runnable action = beforeSave;
        if (action != null) {
            action.run();
        }
    }
}
