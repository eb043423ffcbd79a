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
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.train.AmpSession;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A tiny transformer (two DJL TransformerEncoderBlocks with dropout 0, then a head), every stage a
 * segment: after one step's backward every gradient and every parameter is the uncheckpointed
 * step's, bitwise. Bitwise and not only within rounding because the recomputation runs the same CPU
 * kernels on the same values in the same order, and its gradients reach each parameter in the order
 * they reach it without checkpointing (the last segment first).
 */
class CheckpointingTransformerTest {

    private static final Shape INPUT = new Shape(4, 6, 16);

    static Block transformer() {
        return new SequentialBlock()
                .add(new TransformerEncoderBlock(16, 2, 32, 0f, Activation::relu))
                .add(new TransformerEncoderBlock(16, 2, 32, 0f, Activation::relu))
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    /** Every gradient and parameter after one custom-loop step's backward, and the recomputed. */
    static Map<String, float[]> oneStep(String policy, Checkpointing checkpointing) {
        Engine.getInstance().setRandomSeed(3);
        Map<String, float[]> result = new LinkedHashMap<>();
        try (Model model = Model.newInstance("checkpointing-transformer", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(transformer(), policy);
            model.setBlock(block);
            AmpOptions options =
                    AmpOptions.builder()
                            .checkpointing(checkpointing)
                            .fusedOptimizer(FusedOptimizer.OFF)
                            .build();
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build());
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options));
                    NDManager step = trainer.getManager().newSubManager()) {
                trainer.initialize(INPUT);
                AmpSession amp = AmpSession.of(trainer);
                NDArray x = step.arange((float) INPUT.size()).reshape(INPUT).div(37f).sin();
                NDArray y = step.create(new float[] {0, 1, 2, 1});
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    collector.backward(
                            trainer.getLoss()
                                    .evaluate(new NDList(y), trainer.forward(new NDList(x))));
                }
                amp.unscaleGradients();
                result.put(
                        "recomputed",
                        new float[] {
                            block.getTrainingLink().getCheckpoints().getRecomputedSegments()
                        });
                for (Pair<String, Parameter> pair : block.getParameters()) {
                    Parameter p = pair.getValue();
                    result.put(pair.getKey(), p.getArray().toFloatArray());
                    if (p.requiresGradient()) {
                        result.put(
                                pair.getKey() + ".grad", p.getArray().getGradient().toFloatArray());
                    }
                }
                amp.step();
            }
        }
        return result;
    }

    @ParameterizedTest
    @ValueSource(strings = {"float32", "mixed_bfloat16"})
    void everyGradientIsTheUncheckpointedStepsWithinRounding(String policy) {
        Map<String, float[]> plain = oneStep(policy, Checkpointing.none());
        Map<String, float[]> checkpointed = oneStep(policy, Checkpointing.stages());
        assertEquals(0f, plain.remove("recomputed")[0]);
        assertEquals(4f, checkpointed.remove("recomputed")[0], "4 stages, 4 segments recomputed");
        assertEquals(plain.keySet(), checkpointed.keySet());
        float largest = 0f;
        for (float[] values : plain.values()) {
            for (float v : values) {
                largest = Math.max(largest, Math.abs(v));
            }
        }
        // fp32 rounding of the largest value (2^-23) times 32: the reordered sums of a few terms
        float tolerance = largest * 0x1p-18f;
        int gradients = 0;
        for (String name : plain.keySet()) {
            assertArrayEquals(
                    plain.get(name), checkpointed.get(name), tolerance, policy + " " + name);
            if (name.endsWith(".grad")) {
                gradients++;
                if (name.startsWith("01") && name.contains("Linear_weight")) {
                    float norm = 0f;
                    for (float v : plain.get(name)) {
                        norm = Math.max(norm, Math.abs(v));
                    }
                    assertTrue(
                            norm > 1000 * tolerance,
                            "the first block's gradient is far above the tolerance: " + name);
                }
            }
        }
        assertTrue(gradients >= 10, "the encoders' gradients are compared: " + gradients);
    }
}
