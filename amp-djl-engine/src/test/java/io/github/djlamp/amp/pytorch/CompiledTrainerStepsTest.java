package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.Parameter;
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
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Training through DJL's Trainer in bf16: five steps with the compiled forward end bitwise where
 * five eager steps end, gradients and weights after every step. Without the graph executor's
 * optimizations turned off around the compiled call, the executor differentiated the graph with
 * formulas of its own from its third call, and the convolution's weight gradient drifted from the
 * eager one's by rounding from the second or third step.
 */
class CompiledTrainerStepsTest {

    private static final int STEPS = 5;

    @ParameterizedTest
    @CsvSource({"sgd, OFF", "sgd, ON", "adam, OFF", "adam, ON"})
    void compiledStepsEndBitwiseWhereEagerStepsEnd(String optimizer, FusedOptimizer fused) {
        List<List<float[]>> eager = train(false, optimizer, fused);
        List<List<float[]>> compiled = train(true, optimizer, fused);
        for (int step = 0; step < STEPS; step++) {
            assertEquals(eager.get(step).size(), compiled.get(step).size());
            for (int i = 0; i < eager.get(step).size(); i++) {
                assertArrayEquals(
                        eager.get(step).get(i),
                        compiled.get(step).get(i),
                        0f,
                        "step " + step + ", gradient or weight " + i);
            }
        }
    }

    private static Block network() {
        return new SequentialBlock()
                .add(
                        Conv2d.builder()
                                .setKernelShape(new Shape(3, 3))
                                .optPadding(new Shape(1, 1))
                                .setFilters(8)
                                .build())
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(Pool.globalAvgPool2dBlock())
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(5).build());
    }

    /** Each step's gradients, then its weights and running statistics after the update. */
    private static List<List<float[]>> train(
            boolean compile, String optimizer, FusedOptimizer fused) {
        Engine.getInstance().setRandomSeed(5);
        List<List<float[]>> states = new ArrayList<>();
        try (Model model = Model.newInstance("compiled-steps", "PyTorch")) {
            MixedPrecisionBlock block =
                    Amp.wrap(network(), "mixed_bfloat16").compileForward(compile);
            model.setBlock(block);
            Optimizer update =
                    optimizer.equals("adam")
                            ? Optimizer.adam().optLearningRateTracker(Tracker.fixed(0.01f)).build()
                            : Optimizer.sgd().setLearningRateTracker(Tracker.fixed(0.1f)).build();
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss()).optOptimizer(update);
            AmpOptions options = AmpOptions.builder().fusedOptimizer(fused).build();
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options))) {
                trainer.initialize(new Shape(4, 3, 8, 8));
                for (int i = 0; i < STEPS; i++) {
                    NDManager m = trainer.getManager().newSubManager();
                    NDArray x = m.arange(4f * 3 * 8 * 8).reshape(4, 3, 8, 8).div(100f + i).sin();
                    NDArray y = m.create(new float[] {i % 5, (i + 1) % 5, (i + 2) % 5, 0});
                    try (Batch batch =
                            new Batch(m, new NDList(x), new NDList(y), 4, null, null, i, 1)) {
                        EasyTrain.trainBatch(trainer, batch);
                        List<float[]> state = new ArrayList<>();
                        for (Pair<String, Parameter> p : block.getParameters()) {
                            if (p.getValue().requiresGradient()) {
                                state.add(p.getValue().getArray().getGradient().toFloatArray());
                            }
                        }
                        trainer.step();
                        for (Pair<String, Parameter> p : block.getParameters()) {
                            state.add(p.getValue().getArray().toFloatArray());
                        }
                        states.add(state);
                    }
                }
                Device device = trainer.getManager().getDevice();
                assertEquals(compile, block.isForwardCompiled(device));
            }
        }
        return states;
    }
}
