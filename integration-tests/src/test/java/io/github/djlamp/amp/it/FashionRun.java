package io.github.djlamp.amp.it;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingConfig;
import ai.djl.training.TrainingResult;
import ai.djl.training.dataset.Batch;
import ai.djl.training.dataset.Dataset;
import ai.djl.training.dataset.RandomAccessDataset;
import ai.djl.training.evaluator.Accuracy;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.listener.TrainingListenerAdapter;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.translate.TranslateException;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import java.io.IOException;
import java.util.Arrays;
import java.util.Locale;
import java.util.function.Supplier;

/**
 * One training run on Fashion-MNIST through {@code EasyTrain.fit}, in plain DJL fp32 or through
 * djl-amp, and its test accuracy. Two runs with the same seed start from the same weights and see
 * the same batches in the same order; the result carries fingerprints of both so a test can assert
 * it.
 */
final class FashionRun {

    /** What a run measured. */
    static final class Result {
        final String label;
        final double accuracy;
        final double trainSeconds;
        final double evalSeconds;
        final long steps;
        final long skippedSteps;
        final float finalScale;
        final int initialWeightsHash;
        final int batchOrderHash;
        final float djlValidateAccuracy;
        final float trainLoss;

        Result(
                String label,
                double accuracy,
                double trainSeconds,
                double evalSeconds,
                long steps,
                long skippedSteps,
                float finalScale,
                int initialWeightsHash,
                int batchOrderHash,
                float djlValidateAccuracy,
                float trainLoss) {
            this.label = label;
            this.accuracy = accuracy;
            this.trainSeconds = trainSeconds;
            this.evalSeconds = evalSeconds;
            this.steps = steps;
            this.skippedSteps = skippedSteps;
            this.finalScale = finalScale;
            this.initialWeightsHash = initialWeightsHash;
            this.batchOrderHash = batchOrderHash;
            this.djlValidateAccuracy = djlValidateAccuracy;
            this.trainLoss = trainLoss;
        }

        @Override
        public String toString() {
            return String.format(
                    Locale.ROOT,
                    "%-14s test accuracy %.2f%% (DJL's evaluator: %.2f%%), train loss %.4f, train"
                            + " %.1f s (%d steps, %d skipped, final scale %s), eval %.1f s",
                    label,
                    accuracy * 100,
                    djlValidateAccuracy * 100,
                    trainLoss,
                    trainSeconds,
                    steps,
                    skippedSteps,
                    finalScale,
                    evalSeconds);
        }
    }

    private final Supplier<Block> model;
    private final Shape inputShape;
    private final float learningRate;
    private final int seed;

    /**
     * @param model builds a fresh, uninitialized block
     * @param inputShape the shape of one training batch
     * @param learningRate Adam's initial learning rate
     * @param seed the engine seed for the weights and the batch order
     */
    FashionRun(Supplier<Block> model, Shape inputShape, float learningRate, int seed) {
        this.model = model;
        this.inputShape = inputShape;
        this.learningRate = learningRate;
        this.seed = seed;
    }

    /**
     * Trains for {@code epochs} and measures test accuracy.
     *
     * @param policy null for plain DJL (no djl-amp at all), else a policy for {@code Amp.wrap}
     * @param scaling the loss scaling, or null for the policy's default
     */
    Result run(String policy, LossScaling scaling, int epochs, Dataset train, Dataset test)
            throws IOException, TranslateException {
        String label = policy == null ? "fp32 (DJL)" : policy;
        try (Model m = Model.newInstance("fashion-" + label, "PyTorch")) {
            Block block = model.get();
            m.setBlock(policy == null ? block : Amp.wrap(block, policy));
            BatchOrder order = new BatchOrder();
            TrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.adam()
                                            .optLearningRateTracker(
                                                    cosine(epochs * batchesOf(train)))
                                            .build())
                            .addEvaluator(new Accuracy())
                            .addTrainingListeners(TrainingListener.Defaults.basic())
                            .addTrainingListeners(order);
            if (policy != null) {
                config = Amp.configure(config, m.getBlock(), scaling);
            }
            try (Trainer trainer = m.newTrainer(config)) {
                Engine.getInstance().setRandomSeed(seed);
                trainer.initialize(inputShape);
                int weightsHash = weightsHash(block);
                long start = System.nanoTime();
                // DJL validates on the test set after the epoch, through its own evaluators
                EasyTrain.fit(trainer, epochs, train, test);
                long trained = order.lastBatchEnd;
                TrainingResult djl = trainer.getTrainingResult();
                long evaluating = System.nanoTime();
                double accuracy = accuracy(trainer, test);
                long evaluated = System.nanoTime();
                long steps = order.batches;
                long skipped = 0;
                float scale = 1f;
                if (policy != null) {
                    AmpSession session = AmpSession.of(trainer);
                    steps = session.getScaler().getSteps();
                    skipped = session.getScaler().getSkippedSteps();
                    scale = session.getScaler().getScale();
                }
                Result result =
                        new Result(
                                label,
                                accuracy,
                                (trained - start) / 1e9,
                                (evaluated - evaluating) / 1e9,
                                steps,
                                skipped,
                                scale,
                                weightsHash,
                                order.hash,
                                djl.getValidateEvaluation("Accuracy"),
                                djl.getTrainLoss());
                System.out.println(result);
                return result;
            }
        }
    }

    /**
     * Adam's learning rate decays from {@code learningRate} to 1% of it along a cosine: the final
     * weights are then not dominated by the last few noisy steps, and two runs that differ only in
     * rounding end up close.
     */
    private Tracker cosine(int steps) {
        return Tracker.cosine()
                .setBaseValue(learningRate)
                .optFinalValue(learningRate / 100)
                .setMaxUpdates(steps)
                .build();
    }

    private int batchesOf(Dataset dataset) {
        if (!(dataset instanceof RandomAccessDataset)) {
            throw new IllegalArgumentException("needs a RandomAccessDataset");
        }
        long size = ((RandomAccessDataset) dataset).size();
        long batch = inputShape.get(0);
        return Math.toIntExact((size + batch - 1) / batch);
    }

    /** The fraction of {@code test} the trainer's model classifies right (inference forward). */
    static double accuracy(Trainer trainer, Dataset test) throws IOException, TranslateException {
        long correct = 0;
        long total = 0;
        for (Batch batch : trainer.iterateDataset(test)) {
            try (batch) {
                NDArray logits = trainer.evaluate(batch.getData()).singletonOrThrow();
                if (logits.getDataType() != DataType.FLOAT32) {
                    throw new AssertionError("inference output is " + logits.getDataType());
                }
                NDArray labels = batch.getLabels().singletonOrThrow().toType(DataType.INT64, false);
                correct += logits.argMax(1).eq(labels).countNonzero().getLong();
                total += labels.size();
            }
        }
        return (double) correct / total;
    }

    private static int weightsHash(Block block) {
        int hash = 1;
        for (Pair<String, Parameter> p : block.getParameters()) {
            hash = 31 * hash + p.getKey().hashCode();
            hash = 31 * hash + Arrays.hashCode(p.getValue().getArray().toFloatArray());
        }
        return hash;
    }

    /** Hashes the labels of every training batch, in order. */
    private static final class BatchOrder extends TrainingListenerAdapter {
        int hash = 1;
        long batches;
        long lastBatchEnd;

        @Override
        public void onTrainingBatch(Trainer trainer, BatchData batchData) {
            NDList labels = batchData.getBatch().getLabels();
            hash = 31 * hash + Arrays.hashCode(labels.singletonOrThrow().toFloatArray());
            batches++;
            lastBatchEnd = System.nanoTime();
        }
    }
}
