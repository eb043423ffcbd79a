package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.train.AmpSession;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Frozen layers under checkpointing (issue 30): a network whose stem is frozen with {@code
 * freezeParameters(true)} trains checkpointed as it does without, the same weights and running
 * statistics after a few steps, bitwise. A segment in which nothing asks for a gradient is run as
 * without checkpointing (there is nothing to recompute); one that mixes frozen and trained layers
 * ({@code every(2)}, {@code auto}) is recomputed.
 */
class CheckpointingFrozenLayersTest {

    private static final int STEPS = 3;
    private static final String RECOMPUTED = "segments recomputed";

    private static Block conv() {
        return Conv2d.builder()
                .setKernelShape(new Shape(3, 3))
                .optPadding(new Shape(1, 1))
                .setFilters(8)
                .build();
    }

    /** A stem (conv, BatchNorm, relu) frozen, then a trained unit and a head. */
    private static Block network() {
        Block stem =
                new SequentialBlock()
                        .add(conv())
                        .add(BatchNorm.builder().build())
                        .add(Activation.reluBlock());
        return new SequentialBlock()
                .add(stem)
                .add(conv())
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(Pool.globalAvgPool2dBlock())
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(5).build());
    }

    private static Map<String, float[]> train(String policy, Checkpointing checkpointing) {
        Engine.getInstance().setRandomSeed(21);
        Map<String, float[]> result = new LinkedHashMap<>();
        try (Model model = Model.newInstance("frozen", "PyTorch")) {
            Block network = network();
            MixedPrecisionBlock block = Amp.wrap(network, policy);
            model.setBlock(block);
            AmpOptions options = CheckpointingSetUp.options(policy, checkpointing).build();
            DefaultTrainingConfig config = CheckpointingSetUp.sgd(0.1f);
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options))) {
                trainer.initialize(new Shape(4, 3, 8, 8));
                network.getChildren().get(0).getValue().freezeParameters(true);
                AmpSession amp = AmpSession.of(trainer);
                for (int i = 0; i < STEPS; i++) {
                    try (NDManager step = trainer.getManager().newSubManager()) {
                        NDArray x =
                                step.arange(4f * 3 * 8 * 8).reshape(4, 3, 8, 8).div(300f + i).sin();
                        NDArray y = step.create(new float[] {0, 1, 2, 3});
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            NDArray loss =
                                    trainer.getLoss()
                                            .evaluate(
                                                    new NDList(y), trainer.forward(new NDList(x)));
                            collector.backward(loss);
                        }
                        amp.step();
                    }
                }
                for (Pair<String, Parameter> pair : block.getParameters()) {
                    result.put(pair.getKey(), pair.getValue().getArray().toFloatArray());
                }
                result.put(
                        RECOMPUTED,
                        new float[] {
                            block.getTrainingLink().getCheckpoints().getRecomputedSegments()
                        });
            }
        }
        return result;
    }

    @ParameterizedTest
    @ValueSource(strings = {"float32", "mixed_bfloat16", "mixed_float16"})
    void aFrozenStemTrainsCheckpointedAsWithout(String policy) {
        Map<String, float[]> plain = train(policy, Checkpointing.none());
        assertEquals(0f, plain.remove(RECOMPUTED)[0]);
        for (Checkpointing setting :
                new Checkpointing[] {
                    Checkpointing.stages(), Checkpointing.every(2), Checkpointing.auto()
                }) {
            Map<String, float[]> checkpointed = train(policy, setting);
            assertTrue(
                    checkpointed.remove(RECOMPUTED)[0] > 0f,
                    setting + ": the trained part is still checkpointed");
            assertEquals(plain.keySet(), checkpointed.keySet());
            for (String name : plain.keySet()) {
                assertArrayEquals(
                        plain.get(name),
                        checkpointed.get(name),
                        policy + " " + setting + " " + name);
            }
        }
    }
}
