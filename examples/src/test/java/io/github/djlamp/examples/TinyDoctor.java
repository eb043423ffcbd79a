package io.github.djlamp.examples;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.TrainingConfig;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.doctor.AmpDoctor;

/** A tiny classification problem and MLP for doctor runs that take a second. */
final class TinyDoctor {

    static final int SAMPLES = 64;
    static final int BATCH = 16;
    static final int FEATURES = 8;
    static final int CLASSES = 4;

    private TinyDoctor() {}

    /** A fresh MLP. */
    static Block mlp() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(32).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(CLASSES).build());
    }

    /** Plain DJL configuration: cross-entropy and Adam. */
    static TrainingConfig config() {
        return new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                .optOptimizer(Optimizer.adam().optLearningRateTracker(Tracker.fixed(0.01f)).build())
                .optDevices(Engine.getInstance().getDevices(1));
    }

    /** Label = which of the first four features is largest: learnable by the MLP. */
    static ArrayDataset dataset(NDManager manager, int samples, boolean shuffle, int seed) {
        Engine.getInstance().setRandomSeed(seed);
        NDArray x = manager.randomNormal(new Shape(samples, FEATURES));
        NDArray y = x.get(":, 0:4").argMax(1).toType(DataType.FLOAT32, false);
        return new ArrayDataset.Builder()
                .setData(x)
                .optLabels(y)
                .setSampling(BATCH, shuffle)
                .build();
    }

    /** A doctor over the tiny problem, silent, with the given epochs and policies. */
    static AmpDoctor.Builder builder(NDManager manager, int epochs, String... policies) {
        return AmpDoctor.builder()
                .setModelFactory(TinyDoctor::mlp)
                .setTrainingConfig(TinyDoctor::config)
                .setDataset(dataset(manager, SAMPLES, true, 1), dataset(manager, 32, false, 2))
                .optEpochs(epochs)
                .optPrecisions(policies)
                .optWarmupSteps(1)
                .optProgress(false);
    }
}
