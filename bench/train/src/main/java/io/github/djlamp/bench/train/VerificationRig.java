package io.github.djlamp.bench.train;

import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.pooling.Pool;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.verify.KernelVerdict;
import io.github.djlamp.amp.verify.KernelVerification;
import java.util.List;
import java.util.Locale;

/**
 * One network trained under a djl-amp policy with kernel verification on or off, for {@link
 * VerificationCommand}: {@code Amp.wrap(block, policy, verification)}, SGD as every benchmark
 * (learning rate 0.01, momentum 0.9), DJL's per-parameter optimizer update, random data; a step is
 * timed as {@code EasyTrain.fit} runs it.
 */
final class VerificationRig implements AutoCloseable {

    /** The networks this benchmark trains: {@link Network}'s, and a LeNet-like CNN. */
    static final String NETWORKS = "resnet18, resnet50, lenet";

    private final Model model;
    private final Trainer trainer;
    private final MixedPrecisionBlock wrapped;
    private final Shape batchShape;

    private VerificationRig(
            Model model, Trainer trainer, MixedPrecisionBlock wrapped, Shape batchShape) {
        this.model = model;
        this.trainer = trainer;
        this.wrapped = wrapped;
        this.batchShape = batchShape;
    }

    /**
     * Builds and initializes a network for training; no forward pass runs yet, so no kernel is
     * checked before the first {@link #step()}.
     */
    static VerificationRig create(
            String network, String policy, KernelVerification verification, int batch) {
        Model model = Model.newInstance(network + "-" + verification, "PyTorch");
        try {
            MixedPrecisionBlock wrapped = Amp.wrap(build(network), policy, verification);
            model.setBlock(wrapped);
            DefaultTrainingConfig base =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(
                                                    Tracker.fixed(TrainingRig.LEARNING_RATE))
                                            .optMomentum(TrainingRig.MOMENTUM)
                                            .build());
            Trainer trainer =
                    model.newTrainer(
                            Amp.configure(
                                    base,
                                    wrapped,
                                    AmpOptions.builder()
                                            .fusedOptimizer(FusedOptimizer.OFF)
                                            .build()));
            trainer.initialize(inputShape(network, 1));
            return new VerificationRig(model, trainer, wrapped, inputShape(network, batch));
        } catch (RuntimeException e) {
            model.close();
            throw e;
        }
    }

    /** Describes a network, e.g. {@code ResNetV1-50, 3x32x32}. */
    static String describe(String network) {
        if (isLeNet(network)) {
            return "LeNet-like CNN (conv 5x5 1->8 pad 2, pool, conv 5x5 8->16, pool, linear"
                    + " 400-120-84-10), 1x28x28";
        }
        return Network.of(network).describe();
    }

    private static boolean isLeNet(String network) {
        return "lenet".equals(network.toLowerCase(Locale.ROOT));
    }

    private static Block build(String network) {
        return isLeNet(network) ? leNet() : Network.of(network).build();
    }

    private static Shape inputShape(String network, int batch) {
        return isLeNet(network)
                ? new Shape(batch, 1, 28, 28)
                : Network.of(network).inputShape(batch);
    }

    /**
     * The LeNet-like CNN of the integration test {@code KernelVerificationOnFashionMnistTest}: the
     * stem (5x5, 1 to 8 channels, padding 2, on 28x28) is the layer oneDNN's bf16 kernels computed
     * wrong on some machines.
     */
    static SequentialBlock leNet() {
        return new SequentialBlock()
                .add(conv(8, 2))
                .add(Activation.reluBlock())
                .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                .add(conv(16, 0))
                .add(Activation.reluBlock())
                .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(120).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(84).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(Network.CLASSES).build());
    }

    private static Conv2d conv(int filters, int pad) {
        return Conv2d.builder()
                .setFilters(filters)
                .setKernelShape(new Shape(5, 5))
                .optPadding(new Shape(pad, pad))
                .build();
    }

    /**
     * Runs one training step on fresh random data: {@code trainBatch}, {@code trainer.step()},
     * {@code batch.close()}; making the batch is not timed.
     *
     * @return the step's wall time in nanoseconds
     */
    long step() {
        Batch batch = randomBatch();
        long start = System.nanoTime();
        EasyTrain.trainBatch(trainer, batch);
        trainer.step();
        batch.close();
        return System.nanoTime() - start;
    }

    /** The verdicts of this model's layers (empty with verification off). */
    List<KernelVerdict> verdicts() {
        return wrapped.getKernelVerdicts();
    }

    private Batch randomBatch() {
        NDManager m = trainer.getManager().newSubManager();
        long batch = batchShape.get(0);
        NDArray x = m.randomUniform(0f, 1f, batchShape);
        NDArray y =
                m.randomInteger(0, Network.CLASSES, new Shape(batch), DataType.INT32)
                        .toType(DataType.FLOAT32, false);
        return new Batch(m, new NDList(x), new NDList(y), (int) batch, null, null, 0, 1);
    }

    /** Closes the trainer and the model. */
    @Override
    public void close() {
        trainer.close();
        model.close();
    }
}
