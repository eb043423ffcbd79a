package io.github.djlamp.bench.train;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.util.Pair;
import io.github.djlamp.amp.capture.CapturedStep;
import io.github.djlamp.amp.cast.ArithmeticShare;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.cast.internal.CheckpointControl;
import io.github.djlamp.amp.train.AmpSession;
import java.util.List;

/**
 * One network trained one way: a model, its trainer, and a step on fresh random data, exactly as
 * {@code EasyTrain.fit} runs it ({@code trainBatch}, {@code step}, {@code batch.close()}).
 *
 * <p>Every variant trains with the same loss (softmax cross-entropy) and optimizer ({@link
 * Network#optimizer()}: SGD with learning rate 0.01 and momentum 0.9, Adam for {@code
 * transformer-256}) as {@code bench/train/pytorch_resnet.py}.
 */
public final class TrainingRig implements AutoCloseable {

    /** The learning rate of every benchmark's SGD. */
    public static final float LEARNING_RATE = 0.01f;

    /** The momentum of every benchmark's SGD. */
    public static final float MOMENTUM = 0.9f;

    private final Network network;
    private final Variant variant;
    private final int batchSize;
    private final Model model;
    private final Trainer trainer;
    private final ProbedLoss loss;
    private CapturedStep captured;

    private TrainingRig(
            Network network,
            Variant variant,
            int batchSize,
            Model model,
            Trainer trainer,
            ProbedLoss loss) {
        this.network = network;
        this.loss = loss;
        this.variant = variant;
        this.batchSize = batchSize;
        this.model = model;
        this.trainer = trainer;
    }

    /**
     * Builds and initializes a network for training.
     *
     * @param network the network
     * @param variant how to train it
     * @param batchSize the batch size of every step
     * @return the rig, ready to step
     */
    public static TrainingRig create(Network network, Variant variant, int batchSize) {
        Model model = Model.newInstance(network.key() + "-" + variant.key(), "PyTorch");
        try {
            model.setBlock(variant.wrap(network.build()));
            ProbedLoss loss = new ProbedLoss(Loss.softmaxCrossEntropyLoss());
            DefaultTrainingConfig base =
                    new DefaultTrainingConfig(loss).optOptimizer(network.optimizer());
            Trainer trainer = model.newTrainer(variant.configure(base, model.getBlock()));
            // Parameter shapes do not depend on the batch; initializing with one image keeps the
            // shape inference of DJL's lambda blocks from touching batch-sized memory.
            trainer.initialize(network.inputShape(1));
            return new TrainingRig(network, variant, batchSize, model, trainer, loss);
        } catch (RuntimeException e) {
            model.close();
            throw e;
        }
    }

    /**
     * Returns the variant.
     *
     * @return how this rig trains
     */
    public Variant getVariant() {
        return variant;
    }

    /**
     * Returns the trainer.
     *
     * @return the trainer
     */
    public Trainer getTrainer() {
        return trainer;
    }

    /**
     * Returns the number of trainable scalars of the network.
     *
     * @return the parameter count
     */
    public long parameterCount() {
        long count = 0;
        for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
            if (p.getValue().requiresGradient()) {
                count += p.getValue().getArray().size();
            }
        }
        return count;
    }

    /**
     * Returns the shapes of the trainable parameters in the network's order, e.g. {@code
     * 64x1x3x3;64;64}: the PyTorch script writes the same list for its copy of the network.
     *
     * @return the shapes joined by semicolons
     */
    public String parameterShapes() {
        StringBuilder shapes = new StringBuilder();
        for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
            if (p.getValue().requiresGradient()) {
                if (shapes.length() > 0) {
                    shapes.append(';');
                }
                long[] dims = p.getValue().getArray().getShape().getShape();
                for (int i = 0; i < dims.length; i++) {
                    shapes.append(i == 0 ? "" : "x").append(dims[i]);
                }
            }
        }
        return shapes.toString();
    }

    /**
     * Returns the share of the arithmetic (FLOPs of the layers that ran) djl-amp computed in 16
     * bits on the rig's device, as {@code MixedPrecisionBlock.getArithmeticShare} reports it after
     * the first forward.
     *
     * @return the share, or null for plain DJL, before a step, or where djl-amp computes in fp32
     */
    public ArithmeticShare arithmeticShare() {
        if (model.getBlock() instanceof MixedPrecisionBlock block) {
            return block.getArithmeticShare(getDevice());
        }
        return null;
    }

    /**
     * Returns the units with no parameters (lambdas, joins) that run in fp32 between two 16-bit
     * units, each a cast on either side, as djl-amp's first-forward WARN names them.
     *
     * @return the islands' paths, or null for a variant that does not wrap the block
     */
    public List<String> fp32Islands() {
        if (model.getBlock() instanceof MixedPrecisionBlock block) {
            return block.getPrecisionSummary(getDevice(), model.getNDManager()).getFp32Islands();
        }
        return null;
    }

    /**
     * Returns what the first step's checkpointed segments kept and dropped, as djl-amp logs it.
     *
     * @return the estimate, or null without checkpointing or before a step
     */
    public CheckpointControl.SavingEstimate checkpointSavingEstimate() {
        if (model.getBlock() instanceof MixedPrecisionBlock block) {
            return block.getTrainingLink().getCheckpoints().getSavingEstimate();
        }
        return null;
    }

    /**
     * Runs one training step on a fresh batch of random images and labels.
     *
     * <p>The timer covers what {@code EasyTrain.fit} does per batch: {@code trainBatch} (forward,
     * loss, backward, listeners), {@code trainer.step()} and {@code batch.close()}; making the
     * random batch is not timed.
     *
     * @return the step's wall time in nanoseconds
     */
    public long step() {
        return step(null);
    }

    /**
     * Runs one training step as {@link #step()} does, reading glibc's in-use bytes over it.
     *
     * @param memory what to record the step's memory in (its clock includes the reads), or null
     * @return the step's wall time in nanoseconds
     */
    public long step(StepMemory memory) {
        Batch batch = randomBatch();
        synchronizeDevice();
        long start = System.nanoTime();
        if (memory != null) {
            memory.begin();
            loss.atEvaluate = memory::backwardStart;
        }
        try {
            if (variant.capturesStep()) {
                capturedStep().run(batch.getData(), batch.getLabels());
            } else {
                EasyTrain.trainBatch(trainer, batch);
                trainer.step();
            }
            batch.close();
        } finally {
            if (memory != null) {
                loss.atEvaluate = null;
                memory.end();
            }
        }
        synchronizeDevice();
        return System.nanoTime() - start;
    }

    /**
     * Runs one training step as {@link #step()} does, with libtorch's profiler's markers: an {@link
     * OpTrace#STEP_MARKER} operation before the step (not timed) and an {@link OpTrace#LOSS_MARKER}
     * operation when the loss starts.
     *
     * @return the step's wall time in nanoseconds
     */
    long markedStep() {
        try (NDManager m = trainer.getManager().newSubManager()) {
            m.eye(2);
            loss.beforeEvaluate = () -> m.arange(2f);
            return step(null);
        } finally {
            loss.beforeEvaluate = null;
        }
    }

    /**
     * On a GPU, waits until every queued kernel has run (as {@code torch.cuda.synchronize()}), so
     * that a clock read afterwards covers the step's device work; on the CPU, where DJL's calls
     * return when their work is done, does nothing.
     */
    void synchronizeDevice() {
        if (!trainer.getManager().getDevice().isGpu()) {
            return;
        }
        // A host read of a device value waits for the stream; the temporary manager frees the
        // array and the host copy DJL attaches under it.
        try (NDManager m = trainer.getManager().newSubManager()) {
            m.zeros(new Shape(1)).toFloatArray();
        }
    }

    /**
     * The step of a capturing variant: the body is what {@code EasyTrain.trainBatch} runs for one
     * device (forward, loss, backward), the captured step adds {@code amp.step()}.
     */
    private CapturedStep capturedStep() {
        if (captured == null) {
            captured =
                    AmpSession.of(trainer)
                            .captureStep(
                                    (data, labels) -> {
                                        try (GradientCollector collector =
                                                trainer.newGradientCollector()) {
                                            NDArray value =
                                                    trainer.getLoss()
                                                            .evaluate(
                                                                    labels, trainer.forward(data));
                                            collector.backward(value);
                                            return new NDList(value);
                                        }
                                    });
        }
        return captured;
    }

    /**
     * Returns what a capturing variant's step did: captured and replayed, or why it ran eagerly.
     *
     * @return e.g. {@code REPLAYING, 20 replays}, or null for a variant that does not capture or
     *     before its first step
     */
    public String captureState() {
        if (captured == null) {
            return null;
        }
        return captured.getState()
                + ", "
                + captured.getReplays()
                + " replays"
                + (captured.getRefusal() == null ? "" : ": " + captured.getRefusal());
    }

    /**
     * Returns the device the rig trains on.
     *
     * @return the trainer's device
     */
    public Device getDevice() {
        return trainer.getManager().getDevice();
    }

    /**
     * Makes a batch of uniform random images and random labels on its own manager, which closing
     * the batch frees.
     *
     * @return the batch
     */
    Batch randomBatch() {
        NDManager m = trainer.getManager().newSubManager();
        NDArray x = m.randomUniform(0f, 1f, network.inputShape(batchSize));
        NDArray y =
                m.randomInteger(0, Network.CLASSES, new Shape(batchSize), DataType.INT32)
                        .toType(DataType.FLOAT32, false);
        return new Batch(m, new NDList(x), new NDList(y), batchSize, null, null, 0, 1);
    }

    /**
     * The training loss with a hook run when it has been computed, just before {@code EasyTrain}
     * starts the backward pass: what the step memory reads as backward start. djl-amp's scaled loss
     * wraps this one.
     */
    static final class ProbedLoss extends Loss {

        private final Loss delegate;
        private volatile Runnable atEvaluate;
        private volatile Runnable beforeEvaluate;

        ProbedLoss(Loss delegate) {
            super(delegate.getName());
            this.delegate = delegate;
        }

        @Override
        public NDArray evaluate(NDList labels, NDList predictions) {
            Runnable before = beforeEvaluate;
            if (before != null) {
                before.run();
            }
            NDArray value = delegate.evaluate(labels, predictions);
            Runnable hook = atEvaluate;
            if (hook != null) {
                hook.run();
            }
            return value;
        }
    }

    /** Closes the trainer and the model. */
    @Override
    public void close() {
        if (captured != null) {
            captured.close();
        }
        trainer.close();
        model.close();
    }
}
