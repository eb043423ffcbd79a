package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.train.AmpSession;
import org.junit.jupiter.api.Test;

class WrapperSmokeTest {

    @Test
    void mlpTrainsInBf16() throws Exception {
        Engine.getInstance().setRandomSeed(1);
        Block mlp =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(32).build())
                        .add(Activation.reluBlock())
                        .add(Linear.builder().setUnits(4).build());
        try (Model model = Model.newInstance("mlp", "PyTorch")) {
            model.setBlock(Amp.wrap(mlp, "mixed_bfloat16"));
            DefaultTrainingConfig base =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.adam()
                                            .optLearningRateTracker(Tracker.fixed(0.01f))
                                            .build());
            try (Trainer trainer = model.newTrainer(Amp.configure(base, model.getBlock()))) {
                trainer.initialize(new Shape(16, 8));
                NDManager m = trainer.getManager();
                NDArray x = m.randomNormal(new Shape(64, 8));
                NDArray y = x.get(":, 0:4").argMax(1).toType(DataType.FLOAT32, false);
                ArrayDataset data =
                        new ArrayDataset.Builder()
                                .setData(x)
                                .optLabels(y)
                                .setSampling(16, false)
                                .build();
                float first = Float.NaN;
                float last = Float.NaN;
                for (int epoch = 0; epoch < 20; epoch++) {
                    for (Batch batch : trainer.iterateDataset(data)) {
                        EasyTrain.trainBatch(trainer, batch);
                        trainer.step();
                        batch.close();
                    }
                    trainer.notifyListeners(l -> l.onEpoch(trainer));
                    float loss =
                            Loss.softmaxCrossEntropyLoss()
                                    .evaluate(new NDList(y), trainer.evaluate(new NDList(x)))
                                    .getFloat();
                    if (epoch == 0) {
                        first = loss;
                    }
                    last = loss;
                }
                System.out.println("loss " + first + " -> " + last);
                assertTrue(last < first * 0.7, "loss " + first + " -> " + last);
                AmpSession session = AmpSession.of(trainer);
                assertEquals(80, session.getScaler().getSteps());
                MixedPrecisionBlock block = (MixedPrecisionBlock) model.getBlock();
                // 2 weights + 2 biases, cast through the cache at the first training forward and
                // the first evaluation only: every later forward runs compiled, its casts inside
                // the one native call
                assertEquals(4 * 2, block.getTrainingLink().getCastCache().getCastsMade());
                assertTrue(block.isForwardCompiled(x.getDevice()));
                NDList out = trainer.evaluate(new NDList(x.get("0:2")));
                assertEquals(DataType.FLOAT32, out.singletonOrThrow().getDataType());
            }
        }
    }

    @Test
    void resnetForwardBackwardInBf16() throws Exception {
        Block resnet =
                ResNetV1.builder()
                        .setImageShape(new Shape(1, 28, 28))
                        .setNumLayers(20)
                        .setOutSize(10)
                        .build();
        try (Model model = Model.newInstance("resnet", "PyTorch")) {
            model.setBlock(Amp.wrap(resnet, "mixed_bfloat16"));
            DefaultTrainingConfig base =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build());
            try (Trainer trainer = model.newTrainer(Amp.configure(base, model.getBlock()))) {
                trainer.initialize(new Shape(8, 1, 28, 28));
                NDManager m = trainer.getManager();
                NDArray x = m.randomNormal(new Shape(16, 1, 28, 28));
                NDArray y =
                        m.randomInteger(0, 10, new Shape(16), DataType.INT32)
                                .toType(DataType.FLOAT32, false);
                ArrayDataset data =
                        new ArrayDataset.Builder()
                                .setData(x)
                                .optLabels(y)
                                .setSampling(8, false)
                                .build();
                for (Batch batch : trainer.iterateDataset(data)) {
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                    batch.close();
                }
                assertEquals(2, AmpSession.of(trainer).getScaler().getSteps());
            }
        }
    }
}
