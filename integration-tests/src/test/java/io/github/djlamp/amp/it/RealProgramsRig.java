package io.github.djlamp.amp.it;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.train.AmpSession;
import java.util.ArrayList;
import java.util.List;

/** Small pieces shared by the tests of the programs DJL users write: an MLP, data, a loop. */
final class RealProgramsRig {

    private RealProgramsRig() {}

    /** Linear 8, ReLU, Linear 4: the first and last layers, to freeze and unfreeze. */
    static final class Mlp {
        final Linear first = Linear.builder().setUnits(8).build();
        final Linear last = Linear.builder().setUnits(ToyTask.CLASSES).build();
        final SequentialBlock block =
                new SequentialBlock().add(first).add(Activation.reluBlock()).add(last);
    }

    static DefaultTrainingConfig sgd(float learningRate) {
        return new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                .optOptimizer(
                        Optimizer.sgd()
                                .setLearningRateTracker(Tracker.fixed(learningRate))
                                .build());
    }

    /** {@code batches} batches of the toy task; those listed in {@code nanBatches} hold a NaN. */
    static ArrayDataset data(NDManager manager, int batches, int... nanBatches) {
        NDArray x =
                manager.randomNormal(new Shape((long) ToyTask.BATCH * batches, ToyTask.FEATURES));
        NDArray y = x.get(":, 0:" + ToyTask.CLASSES).argMax(1).toType(x.getDataType(), false);
        for (int b : nanBatches) {
            x.set(new ai.djl.ndarray.index.NDIndex((long) b * ToyTask.BATCH + ", 0"), Float.NaN);
        }
        return new ArrayDataset.Builder()
                .setData(x)
                .optLabels(y)
                .setSampling(ToyTask.BATCH, false)
                .build();
    }

    /** One custom-loop step as the README shows it; returns the loss value it logged. */
    static float customStep(Trainer trainer, AmpSession amp, ToyTask task, int i) {
        try (NDManager step = trainer.getManager().newSubManager()) {
            NDArray x = task.x.get(task.rows(i));
            NDArray y = task.y.get(task.rows(i));
            x.attach(step);
            y.attach(step);
            float value;
            try (GradientCollector collector = trainer.newGradientCollector()) {
                NDArray loss =
                        trainer.getLoss().evaluate(new NDList(y), trainer.forward(new NDList(x)));
                collector.backward(loss);
                value = loss.getFloat();
            }
            amp.step();
            return value;
        }
    }

    /** Copies of every parameter's values, by name. */
    static List<float[]> values(ai.djl.nn.Block block) {
        List<float[]> result = new ArrayList<>();
        for (Pair<String, Parameter> p : block.getParameters()) {
            result.add(p.getValue().getArray().toFloatArray());
        }
        return result;
    }

    /** The largest absolute element of every parameter's real gradient. */
    static float largestGradient(ai.djl.nn.Block block, NDManager manager) {
        float largest = 0;
        for (Pair<String, Parameter> p : block.getParameters()) {
            if (!p.getValue().requiresGradient()) {
                continue;
            }
            NDArray grad = p.getValue().getArray().getGradient();
            grad.attach(manager);
            for (float v : grad.toFloatArray()) {
                largest = Math.max(largest, Math.abs(v));
            }
        }
        return largest;
    }

    static float largestChange(float[] before, float[] after) {
        float largest = 0;
        for (int i = 0; i < before.length; i++) {
            largest = Math.max(largest, Math.abs(after[i] - before[i]));
        }
        return largest;
    }
}
