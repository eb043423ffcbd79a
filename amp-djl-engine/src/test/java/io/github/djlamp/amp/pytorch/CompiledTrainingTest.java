package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
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
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.translate.Batchifier;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.scale.LossScaling;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Training through DJL's Trainer with the compiled forward, djl-amp's fused SGD step and dynamic
 * loss scaling: in fp32 every parameter after three steps is bitwise the eager wrapper's.
 */
class CompiledTrainingTest {

    private static final Shape INPUT = new Shape(2, 1, 32, 32);
    private static final int STEPS = 3;

    @Test
    void fusedStepsWithLossScalingMatchTheEagerWrapperBitwise() {
        List<float[]> eager = train(false);
        List<float[]> compiled = train(true);
        assertEquals(eager.size(), compiled.size());
        for (int i = 0; i < eager.size(); i++) {
            assertArrayEquals(eager.get(i), compiled.get(i), 0f, "parameter " + i);
        }
    }

    private static List<float[]> train(boolean compile) {
        Engine.getInstance().setRandomSeed(9);
        MixedPrecisionBlock wrapped =
                Amp.wrap(
                                ResNetV1.builder()
                                        .setImageShape(new Shape(1, 32, 32))
                                        .setNumLayers(18)
                                        .setOutSize(10)
                                        .build(),
                                "float32")
                        .compileForward(compile);
        try (Model model = Model.newInstance("compiled", "PyTorch")) {
            model.setBlock(wrapped);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.05f))
                                            .optMomentum(0.9f)
                                            .build());
            AmpOptions options =
                    AmpOptions.builder()
                            .fusedOptimizer(FusedOptimizer.ON)
                            .lossScaling(LossScaling.dynamic())
                            .build();
            try (Trainer trainer = model.newTrainer(Amp.configure(config, wrapped, options))) {
                trainer.initialize(INPUT);
                NDManager data = trainer.getManager();
                NDArray x = data.randomNormal(INPUT);
                NDArray y =
                        data.randomInteger(0, 10, new Shape(INPUT.get(0)), DataType.INT32)
                                .toType(DataType.FLOAT32, false);
                for (int step = 0; step < STEPS; step++) {
                    NDManager stepManager = data.newSubManager();
                    NDArray xs = x.duplicate();
                    NDArray ys = y.duplicate();
                    xs.attach(stepManager);
                    ys.attach(stepManager);
                    try (Batch batch =
                            new Batch(
                                    stepManager,
                                    new NDList(xs),
                                    new NDList(ys),
                                    (int) INPUT.get(0),
                                    Batchifier.STACK,
                                    Batchifier.STACK,
                                    step,
                                    STEPS)) {
                        EasyTrain.trainBatch(trainer, batch);
                        trainer.step();
                    }
                }
                assertEquals(compile, wrapped.isForwardCompiled(x.getDevice()));
                List<float[]> values = new ArrayList<>();
                for (Pair<String, Parameter> p : wrapped.getParameters()) {
                    values.add(p.getValue().getArray().toFloatArray());
                }
                assertTrue(values.size() > 100);
                return values;
            }
        }
    }
}
