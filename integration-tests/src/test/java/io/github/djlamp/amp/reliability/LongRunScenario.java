package io.github.djlamp.amp.reliability;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.scale.LossScaling;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * Child-JVM program for {@link LongRunTest}: trains a small CNN for the given number of steps, with
 * an overflowing batch every 97th step, and prints the live native arrays and RSS every {@value
 * #EVERY} steps as {@code step=N arrays=A rssKb=R}.
 */
public final class LongRunScenario {

    /** Steps between two measurements. */
    static final int EVERY = 500;

    private LongRunScenario() {}

    /**
     * Runs the scenario.
     *
     * @param args the policy and the number of steps
     * @throws IOException if /proc/self/status cannot be read
     */
    public static void main(String[] args) throws IOException {
        String policy = args[0];
        int steps = Integer.parseInt(args[1]);
        Engine.getInstance().setRandomSeed(3);
        try (Model model = Model.newInstance("long", "PyTorch");
                NDManager probe = NDManager.newBaseManager("PyTorch")) {
            model.setBlock(
                    Amp.wrap(
                            new SequentialBlock()
                                    .add(
                                            Conv2d.builder()
                                                    .setKernelShape(new Shape(3, 3))
                                                    .setFilters(8)
                                                    .build())
                                    .add(BatchNorm.builder().build())
                                    .add(Activation.reluBlock())
                                    .add(Blocks.batchFlattenBlock())
                                    .add(Linear.builder().setUnits(4).build()),
                            policy));
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.adam()
                                            .optLearningRateTracker(Tracker.fixed(0.001f))
                                            .build());
            LossScaling scaling = LossScaling.dynamicBuilder().growthInterval(50).build();
            try (Trainer trainer =
                    model.newTrainer(Amp.configure(config, model.getBlock(), scaling))) {
                trainer.initialize(new Shape(4, 1, 6, 6));
                for (int step = 1; step <= steps; step++) {
                    NDManager m = trainer.getManager().newSubManager();
                    NDArray x = m.randomNormal(new Shape(4, 1, 6, 6));
                    if (step % 97 == 0) {
                        x = x.mul(Float.POSITIVE_INFINITY); // overflow: the skip path runs too
                    }
                    NDArray y = m.randomInteger(0, 4, new Shape(4), DataType.INT32);
                    Batch batch = new Batch(m, new NDList(x), new NDList(y), 4, null, null, 0, 1);
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                    batch.close();
                    if (step % EVERY == 0) {
                        int arrays = probe.getParentManager().getManagedArrays().size();
                        System.out.println(
                                "step=" + step + " arrays=" + arrays + " rssKb=" + rssKb());
                    }
                }
            }
        }
    }

    private static long rssKb() throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        throw new IllegalStateException("no VmRSS in /proc/self/status");
    }

    /** Reads the values of {@code key=} from the printed measurement lines, in order. */
    static long[] series(String output, String key) {
        List<Long> values = new ArrayList<>();
        for (String line : output.split("\n")) {
            if (line.startsWith("step=")) {
                for (String part : line.trim().split(" ")) {
                    if (part.startsWith(key + "=")) {
                        values.add(Long.parseLong(part.substring(key.length() + 1)));
                    }
                }
            }
        }
        return values.stream().mapToLong(Long::longValue).toArray();
    }
}
