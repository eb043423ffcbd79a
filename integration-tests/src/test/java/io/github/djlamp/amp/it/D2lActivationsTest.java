package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import ai.djl.nn.pooling.Pool;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.translate.Batchifier;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.cast.PrecisionSummary;
import io.github.djlamp.amp.train.AmpSession;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A network written as d2l-java writes them, activations as {@code .add(Activation::relu)}, runs in
 * bf16 with no fp32 island (every ReLU passes bf16 through, as with {@code Activation.reluBlock()})
 * and trains.
 */
class D2lActivationsTest {

    /** The network, in a class of its own: it writes no other lambda. */
    static final class D2lNet {
        static SequentialBlock build() {
            return new SequentialBlock()
                    .add(conv(4))
                    .add(BatchNorm.builder().build())
                    .add(Activation::relu)
                    .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                    .add(conv(8))
                    .add(BatchNorm.builder().build())
                    .add(Activation::relu)
                    .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                    .add(Blocks.batchFlattenBlock())
                    .add(Linear.builder().setUnits(16).build())
                    .add(Activation::sigmoid)
                    .add(Linear.builder().setUnits(4).build());
        }

        private static Conv2d conv(int filters) {
            return Conv2d.builder()
                    .setKernelShape(new Shape(3, 3))
                    .optPadding(new Shape(1, 1))
                    .setFilters(filters)
                    .build();
        }
    }

    @Test
    void aD2lNetworkRunsInBf16WithoutFp32IslandsAndTrains() throws Exception {
        Engine.getInstance().setRandomSeed(3);
        try (Model model = Model.newInstance("d2l", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(D2lNet.build(), "mixed_bfloat16");
            model.setBlock(block);
            DefaultTrainingConfig base =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.05f))
                                            .build());
            try (Trainer trainer = model.newTrainer(Amp.configure(base, block))) {
                Shape input = new Shape(8, 3, 8, 8);
                trainer.initialize(input);
                NDManager m = trainer.getManager();
                PrecisionSummary summary = block.getPrecisionSummary(m.getDevice(), m);
                System.out.println(summary);
                assertEquals(0, summary.getFp32Units(), summary.toString());
                assertEquals(List.of(), summary.getFp32Islands(), summary.toString());

                NDArray x = m.randomNormal(input);
                NDArray y =
                        m.randomInteger(0, 4, new Shape(8), DataType.INT32)
                                .toType(DataType.FLOAT32, false);
                float first = Float.NaN;
                float last = Float.NaN;
                int steps = 6;
                for (int step = 0; step < steps; step++) {
                    Batch batch =
                            new Batch(
                                    m.newSubManager(),
                                    new NDList(x.duplicate()), // closed with the batch
                                    new NDList(y.duplicate()),
                                    8,
                                    Batchifier.STACK,
                                    Batchifier.STACK,
                                    step,
                                    steps);
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                    batch.close();
                    float loss =
                            Loss.softmaxCrossEntropyLoss()
                                    .evaluate(new NDList(y), trainer.evaluate(new NDList(x)))
                                    .getFloat();
                    first = step == 0 ? loss : first;
                    last = loss;
                }
                System.out.println("loss " + first + " -> " + last);
                assertTrue(Float.isFinite(last), "loss " + last);
                assertTrue(last < first, "the same batch, six SGD steps: " + first + " -> " + last);
                assertEquals(steps, AmpSession.of(trainer).getScaler().getSteps());
            }
        }
    }
}
