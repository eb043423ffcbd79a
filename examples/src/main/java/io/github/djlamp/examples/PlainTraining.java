package io.github.djlamp.examples;

import ai.djl.Model;
import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.engine.Engine;
import ai.djl.metric.Metrics;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Dataset;
import ai.djl.training.evaluator.Accuracy;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.examples.data.FashionMnistData;

/**
 * Plain DJL, the starting point: ResNet-20 learns Fashion-MNIST for one epoch with {@code
 * EasyTrain}, as in DJL's own examples. {@link AmpTraining} is this program with two lines changed.
 *
 * <pre>
 * mvn -B -q -pl examples -am compile exec:java -Dexec.mainClass=io.github.djlamp.examples.PlainTraining
 * </pre>
 */
public final class PlainTraining {

    private PlainTraining() {}

    /**
     * Trains one epoch on the shipped subset and prints the test accuracy.
     *
     * @param args optionally the number of training images (default all 6,000; 256 for a quick try)
     * @throws Exception if the data cannot be read
     */
    public static void main(String[] args) throws Exception {
        int images = args.length > 0 ? Integer.parseInt(args[0]) : 6000;
        System.out.printf("Test accuracy: %.2f%%%n", 100 * train(images));
    }

    /**
     * Trains one epoch on {@code images} training images.
     *
     * @param images how many training images to use
     * @return the accuracy on the test images, in [0, 1]
     * @throws Exception if the data cannot be read
     */
    static float train(int images) throws Exception {
        Engine.getInstance().setRandomSeed(42);

        // 1. Data: the Fashion-MNIST subset shipped in this module, read by DJL's own loader
        FashionMnistData data = FashionMnistData.subset(FashionMnistData.defaultWorkDir());
        try (NDManager manager = NDManager.newBaseManager()) {
            FashionMnist train =
                    data.prepare(data.builder(Dataset.Usage.TRAIN, 64, images).optManager(manager));
            FashionMnist test =
                    data.prepare(
                            data.builder(Dataset.Usage.TEST, 64, Math.max(64, images / 6))
                                    .optManager(manager));

            // 2. The model: DJL's model-zoo ResNet-20 for 28x28 grey images, 10 classes
            Block block =
                    ResNetV1.builder()
                            .setImageShape(new Shape(1, 28, 28))
                            .setNumLayers(20)
                            .setOutSize(10)
                            .build();
            try (Model model = Model.newInstance("resnet20")) {
                model.setBlock(block);

                // 3. How to train: loss, optimizer, accuracy, DJL's progress bar with items/sec
                DefaultTrainingConfig config =
                        new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                                .optOptimizer(
                                        Optimizer.adam()
                                                .optLearningRateTracker(Tracker.fixed(0.001f))
                                                .build())
                                .addEvaluator(new Accuracy())
                                .addTrainingListeners(TrainingListener.Defaults.logging());

                // 4. Train one epoch and evaluate on the test set
                try (Trainer trainer = model.newTrainer(config)) {
                    trainer.setMetrics(new Metrics());
                    trainer.initialize(new Shape(64, 1, 28, 28));
                    EasyTrain.fit(trainer, 1, train, test);
                    return trainer.getTrainingResult().getValidateEvaluation("Accuracy");
                }
            }
        }
    }
}
