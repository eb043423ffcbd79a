package io.github.djlamp.examples;

import ai.djl.Model;
import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.dataset.Dataset;
import ai.djl.training.evaluator.Accuracy;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.training.util.ProgressBar;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.examples.data.FashionMnistData;
import java.util.Locale;

/**
 * Mixed precision in a training loop of your own, without {@code EasyTrain}: the four verbs of
 * {@link AmpSession} around DJL's forward, backward and optimizer step.
 *
 * <pre>
 * mvn -B -q -pl examples -am compile exec:java \
 *     -Dexec.mainClass=io.github.djlamp.examples.CustomLoopTraining -Dexec.args="6000 auto"
 * </pre>
 */
public final class CustomLoopTraining {

    private CustomLoopTraining() {}

    /**
     * Trains one epoch on the shipped subset with a hand-written loop and prints what happened.
     *
     * @param args optionally the number of training images (default all 6,000; 256 for a quick
     *     try), then the precision policy (default {@code auto}; {@code fp16} shows loss scaling at
     *     work but is very slow on CPUs)
     * @throws Exception if the data cannot be read
     */
    public static void main(String[] args) throws Exception {
        int images = args.length > 0 ? Integer.parseInt(args[0]) : 6000;
        String policy = args.length > 1 ? args[1] : "auto";
        System.out.println(train(images, policy));
    }

    /**
     * Trains one epoch on {@code images} training images.
     *
     * @param images how many training images to use
     * @param policy the precision policy
     * @return what the loop saw
     * @throws Exception if the data cannot be read
     */
    static Outcome train(int images, String policy) throws Exception {
        Engine.getInstance().setRandomSeed(42);
        FashionMnistData data = FashionMnistData.subset(FashionMnistData.defaultWorkDir());
        try (NDManager manager = NDManager.newBaseManager()) {
            FashionMnist train =
                    data.prepare(data.builder(Dataset.Usage.TRAIN, 64, images).optManager(manager));
            FashionMnist test =
                    data.prepare(
                            data.builder(Dataset.Usage.TEST, 64, Math.max(64, images / 6))
                                    .optManager(manager));
            Block block =
                    ResNetV1.builder()
                            .setImageShape(new Shape(1, 28, 28))
                            .setNumLayers(20)
                            .setOutSize(10)
                            .build();
            Loss loss = Loss.softmaxCrossEntropyLoss();
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(loss)
                            .optOptimizer(
                                    Optimizer.adam()
                                            .optLearningRateTracker(Tracker.fixed(0.001f))
                                            .build());

            try (Model model = Model.newInstance("resnet20")) {
                // The same two lines as with EasyTrain: wrap the block, configure the config
                model.setBlock(Amp.wrap(block, policy));
                try (Trainer trainer = model.newTrainer(Amp.configure(config, model.getBlock()))) {
                    trainer.initialize(new Shape(64, 1, 28, 28));
                    AmpSession amp = AmpSession.of(trainer);
                    System.out.println(
                            "Policy " + amp.getPolicy() + ", " + amp.getScaler().getConfig());

                    Outcome outcome = new Outcome();
                    ProgressBar bar = new ProgressBar("Training", (train.size() + 63) / 64);
                    for (Batch batch : trainer.iterateDataset(train)) {
                        float lossValue;
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            NDList predictions = trainer.forward(batch.getData());
                            // 1. the trainer's loss is scaled for backward; its value is the
                            //    true loss, to log as it is
                            NDArray scaledLoss =
                                    trainer.getLoss().evaluate(batch.getLabels(), predictions);
                            collector.backward(scaledLoss);
                            lossValue = scaledLoss.getFloat();
                        }
                        // 2. unscale and check the gradients, step (skipped on Inf/NaN, gradients
                        //    cleared), move the scale
                        long skippedBefore = amp.getScaler().getSkippedSteps();
                        amp.step();

                        outcome.steps++;
                        outcome.lastLoss = lossValue;
                        if (amp.getScaler().getSkippedSteps() > skippedBefore) {
                            outcome.overflows++;
                        }
                        bar.update(outcome.steps - 1, "loss " + outcome.lastLoss);
                        batch.close();
                    }
                    LossScaler scaler = amp.getScaler();
                    outcome.policy = amp.getPolicy().toString();
                    outcome.skippedSteps = scaler.getSkippedSteps();
                    outcome.finalScale = scaler.getScale();
                    outcome.testAccuracy = accuracy(trainer, test);
                    return outcome;
                }
            }
        }
    }

    /** Evaluates the trained model on the test set. */
    private static float accuracy(Trainer trainer, Dataset test) throws Exception {
        Accuracy accuracy = new Accuracy();
        accuracy.addAccumulator("test");
        for (Batch batch : trainer.iterateDataset(test)) {
            NDList predictions = trainer.evaluate(batch.getData());
            accuracy.updateAccumulator("test", batch.getLabels(), predictions);
            batch.close();
        }
        return accuracy.getAccumulator("test");
    }

    /** What the custom loop saw. */
    static final class Outcome {
        String policy;
        int steps;
        int overflows;
        long skippedSteps;
        float finalScale;
        float lastLoss;
        float testAccuracy;

        @Override
        public String toString() {
            return String.format(
                    Locale.ROOT,
                    "Policy %s: %d steps, %d skipped for Inf/NaN gradients, final loss scale %s,"
                            + " last loss %.4f, test accuracy %.2f%%",
                    policy,
                    steps,
                    skippedSteps,
                    finalScale,
                    lastLoss,
                    100 * testAccuracy);
        }
    }
}
