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
 * A checkpointed step's gradients are the uncheckpointed step's: every parameter's gradient and
 * every BatchNorm running statistic after one step of a small convolutional network, bitwise (the
 * recomputation runs the same kernels on the same values in the same order on the CPU), under fp32,
 * bf16 and fp16 with dynamic loss scaling.
 */
class CheckpointingGradientTest {

    private static final String RECOMPUTED = "segments recomputed";

    static Block network() {
        return new SequentialBlock()
                .add(
                        Conv2d.builder()
                                .setKernelShape(new Shape(3, 3))
                                .optPadding(new Shape(1, 1))
                                .setFilters(8)
                                .build())
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
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

    /** Gradients and running statistics after one custom-loop step's backward and unscale. */
    static Map<String, float[]> oneStep(String policy, Checkpointing checkpointing) {
        Engine.getInstance().setRandomSeed(21);
        Map<String, float[]> result = new LinkedHashMap<>();
        try (Model model = Model.newInstance("checkpointing", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(network(), policy);
            model.setBlock(block);
            AmpOptions options = CheckpointingSetUp.options(policy, checkpointing).build();
            DefaultTrainingConfig config = CheckpointingSetUp.sgd(0.1f);
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options));
                    NDManager step = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(4, 3, 8, 8));
                AmpSession amp = AmpSession.of(trainer);
                NDArray x = step.arange(4f * 3 * 8 * 8).reshape(4, 3, 8, 8).div(300f).sin();
                NDArray y = step.create(new float[] {0, 1, 2, 3});
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    NDArray loss =
                            trainer.getLoss()
                                    .evaluate(new NDList(y), trainer.forward(new NDList(x)));
                    collector.backward(loss);
                }
                amp.unscaleGradients();
                result.put(
                        RECOMPUTED,
                        new float[] {
                            block.getTrainingLink().getCheckpoints().getRecomputedSegments()
                        });
                for (Pair<String, Parameter> pair : block.getParameters()) {
                    Parameter p = pair.getValue();
                    if (p.requiresGradient()) {
                        result.put(
                                pair.getKey() + ".grad", p.getArray().getGradient().toFloatArray());
                    } else {
                        result.put(pair.getKey(), p.getArray().toFloatArray());
                    }
                }
                amp.step();
            }
        }
        return result;
    }

    @ParameterizedTest
    @ValueSource(strings = {"float32", "mixed_bfloat16", "mixed_float16"})
    void everyGradientAndStatisticIsTheUncheckpointedStepsBitwise(String policy) {
        Map<String, float[]> plain = oneStep(policy, Checkpointing.none());
        assertEquals(0f, plain.remove(RECOMPUTED)[0]);
        // 9 stages: 9 segments, 5 of at most 2 stages, 3 of round(sqrt(9)) = 3 stages
        int[] segments = {9, 5, 3};
        Checkpointing[] settings = {
            Checkpointing.stages(), Checkpointing.every(2), Checkpointing.auto()
        };
        for (int s = 0; s < settings.length; s++) {
            Checkpointing setting = settings[s];
            Map<String, float[]> checkpointed = oneStep(policy, setting);
            assertEquals(
                    segments[s],
                    checkpointed.remove(RECOMPUTED)[0],
                    setting + ": the segments recomputed in the step");
            assertEquals(plain.keySet(), checkpointed.keySet());
            for (String name : plain.keySet()) {
                assertArrayEquals(
                        plain.get(name),
                        checkpointed.get(name),
                        policy + " " + setting + " " + name);
            }
            boolean anyNonZero = false;
            for (float v : checkpointed.values().iterator().next()) {
                anyNonZero |= v != 0f;
            }
            assertTrue(anyNonZero, "the first gradient is not all zeros");
        }
    }
}
