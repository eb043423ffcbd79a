package io.github.djlamp.amp.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * 5,000 steps: the live native arrays and the process RSS stay flat after warm-up. Long: runs with
 * {@code mvn verify -Plong} (see README), not in the default build.
 */
@Tag("long")
class LongRunTest {

    private static final int STEPS = 5000;
    private static final int WARM_UP = 500;

    private static long rssKb() throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        throw new IllegalStateException("no VmRSS in /proc/self/status");
    }

    @ParameterizedTest
    @ValueSource(strings = {"mixed_bfloat16", "mixed_float16"})
    void memoryStaysFlat(String policy) throws IOException {
        Engine.getInstance().setRandomSeed(3);
        try (Model model = Model.newInstance("long", "PyTorch")) {
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
                                    .add(ai.djl.nn.Blocks.batchFlattenBlock())
                                    .add(Linear.builder().setUnits(4).build()),
                            policy));
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.adam()
                                            .optLearningRateTracker(Tracker.fixed(0.001f))
                                            .build());
            LossScaling scaling = LossScaling.dynamicBuilder().growthInterval(50).build();
            NDManager root = NDManager.newBaseManager("PyTorch");
            try (Trainer trainer =
                    model.newTrainer(Amp.configure(config, model.getBlock(), scaling))) {
                trainer.initialize(new Shape(4, 1, 6, 6));
                int arraysAfterWarmUp = -1;
                long rssAfterWarmUp = -1;
                for (int step = 1; step <= STEPS; step++) {
                    NDManager m = trainer.getManager().newSubManager();
                    NDArray x = m.randomNormal(new Shape(4, 1, 6, 6));
                    if (step % 97 == 0) {
                        x = x.mul(Float.POSITIVE_INFINITY); // overflow steps take the skip path
                    }
                    NDArray y =
                            m.randomInteger(
                                    0, 4, new Shape(4), ai.djl.ndarray.types.DataType.INT32);
                    Batch batch = new Batch(m, new NDList(x), new NDList(y), 4, null, null, 0, 1);
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                    batch.close();
                    if (step == WARM_UP) {
                        System.gc();
                        arraysAfterWarmUp = root.getParentManager().getManagedArrays().size();
                        rssAfterWarmUp = rssKb();
                    }
                }
                System.gc();
                int arrays = root.getParentManager().getManagedArrays().size();
                long rss = rssKb();
                System.out.printf(
                        "%s: arrays %d -> %d, RSS %d KB -> %d KB%n",
                        policy, arraysAfterWarmUp, arrays, rssAfterWarmUp, rss);
                assertEquals(arraysAfterWarmUp, arrays, "live native arrays");
                assertTrue(rss <= rssAfterWarmUp * 1.05, "RSS " + rssAfterWarmUp + " -> " + rss);
            } finally {
                root.close();
            }
        }
    }
}
