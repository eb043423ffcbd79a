package io.github.djlamp.examples;

import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.pooling.Pool;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.dataset.Dataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.doctor.AmpDoctor;
import io.github.djlamp.amp.doctor.DoctorReport;
import io.github.djlamp.examples.data.FashionMnistData;

/**
 * The AMP doctor on a model of your own: does mixed precision pay off for it, on this hardware?
 * Only a trial tells; this one trains a small convolutional network once in fp32 and once with
 * "auto", from the same weights on the same batches, and prints the comparison.
 *
 * <pre>
 * mvn -B -q -pl examples -am compile exec:java -Dexec.mainClass=io.github.djlamp.examples.DoctorExample
 * </pre>
 */
public final class DoctorExample {

    private DoctorExample() {}

    /**
     * Runs the doctor and prints its table.
     *
     * @param args optionally the number of training images (default all 6,000; 512 for a quick try)
     * @throws Exception if the data cannot be read
     */
    public static void main(String[] args) throws Exception {
        int images = args.length > 0 ? Integer.parseInt(args[0]) : 6000;
        System.out.print(examine(images).toTable());
    }

    /**
     * Runs the doctor on {@code images} training images.
     *
     * @param images how many training images to use
     * @return the doctor's report
     * @throws Exception if the data cannot be read
     */
    static DoctorReport examine(int images) throws Exception {
        FashionMnistData data = FashionMnistData.subset(FashionMnistData.defaultWorkDir());
        try (NDManager manager = NDManager.newBaseManager()) {
            FashionMnist train =
                    data.prepare(data.builder(Dataset.Usage.TRAIN, 64, images).optManager(manager));
            FashionMnist test =
                    data.prepare(
                            data.builder(Dataset.Usage.TEST, 64, Math.max(64, images / 6))
                                    .optManager(manager));

            return AmpDoctor.builder()
                    // your model: a new block on each call
                    .setModelFactory(DoctorExample::smallConvNet)
                    // your plain DJL configuration: the doctor adds AMP itself
                    .setTrainingConfig(
                            () ->
                                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                                            .optOptimizer(
                                                    Optimizer.sgd()
                                                            .setLearningRateTracker(
                                                                    Tracker.fixed(0.01f))
                                                            .optMomentum(0.9f)
                                                            .build()))
                    // your data
                    .setDataset(train, test)
                    .optEpochs(1)
                    .optPrecisions("float32", "auto")
                    .build()
                    .run();
        }
    }

    /** Two convolution stages and a classifier: a stand-in for your own network. */
    private static Block smallConvNet() {
        return new SequentialBlock()
                .add(
                        Conv2d.builder()
                                .setKernelShape(new Shape(3, 3))
                                .optPadding(new Shape(1, 1))
                                .setFilters(32)
                                .build())
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(Pool.maxPool2dBlock(new Shape(2, 2)))
                .add(
                        Conv2d.builder()
                                .setKernelShape(new Shape(3, 3))
                                .optPadding(new Shape(1, 1))
                                .setFilters(64)
                                .build())
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(Pool.maxPool2dBlock(new Shape(2, 2)))
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(128).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(10).build());
    }
}
