package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
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
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.train.AmpSession;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A stack of DJL's transformer encoder blocks checkpointed block by block: the gradients are the
 * uncheckpointed step's within rounding (1e-5 of the largest gradient), in fp32 and bf16; with a
 * dropout rate above 0 the stack is refused, since a recomputation would draw a new mask.
 */
class CheckpointingTransformerTest {

    private static Block encoder(float dropout) {
        return new SequentialBlock()
                .add(new TransformerEncoderBlock(16, 2, 32, dropout, Activation::gelu))
                .add(new TransformerEncoderBlock(16, 2, 32, dropout, Activation::gelu))
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    private static Map<String, float[]> gradients(String policy, Checkpointing checkpointing) {
        Engine.getInstance().setRandomSeed(3);
        Map<String, float[]> result = new LinkedHashMap<>();
        try (Model model = Model.newInstance("transformer", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(encoder(0f), policy);
            model.setBlock(block);
            DefaultTrainingConfig config = CheckpointingSetUp.sgd(0.1f);
            AmpOptions options = CheckpointingSetUp.options(policy, checkpointing).build();
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options));
                    NDManager step = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(4, 6, 16));
                NDArray x = step.arange(4f * 6 * 16).reshape(4, 6, 16).div(50f).cos();
                NDArray y = step.create(new float[] {0, 1, 2, 1});
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    collector.backward(
                            trainer.getLoss()
                                    .evaluate(new NDList(y), trainer.forward(new NDList(x))));
                }
                AmpSession.of(trainer).unscaleGradients();
                result.put(
                        "segments",
                        new float[] {
                            block.getTrainingLink().getCheckpoints().getRecomputedSegments()
                        });
                for (Pair<String, Parameter> pair : block.getParameters()) {
                    NDArray weight = pair.getValue().getArray();
                    if (weight.hasGradient()) { // the encoder has parameters it does not train
                        result.put(pair.getKey(), weight.getGradient().toFloatArray());
                    }
                }
            }
        }
        return result;
    }

    @ParameterizedTest
    @ValueSource(strings = {"float32", "mixed_bfloat16"})
    void eachEncoderBlockCheckpointedGivesTheSameGradientsWithinRounding(String policy) {
        Map<String, float[]> plain = gradients(policy, Checkpointing.none());
        Map<String, float[]> checkpointed =
                gradients(policy, Checkpointing.blocks("class:TransformerEncoderBlock"));
        assertEquals(0f, plain.remove("segments")[0]);
        assertEquals(2f, checkpointed.remove("segments")[0], "both encoder blocks recomputed");
        assertEquals(plain.keySet(), checkpointed.keySet());
        boolean anyNonZero = false;
        float scale = 0f; // the largest gradient anywhere: the key bias's is rounding noise
        for (float[] gradient : plain.values()) {
            for (float v : gradient) {
                scale = Math.max(scale, Math.abs(v));
                anyNonZero |= v != 0f;
            }
        }
        for (String name : plain.keySet()) {
            float[] want = plain.get(name);
            float[] got = checkpointed.get(name);
            for (int i = 0; i < want.length; i++) {
                // within rounding, not bitwise: an encoder's input has four readers (query, key,
                // value, residual), whose gradients autograd adds in another order when the
                // input is a recomputation's leaf
                assertEquals(want[i], got[i], 1e-5f * scale, policy + " " + name + "[" + i + "]");
            }
        }
        assertTrue(anyNonZero);
    }

    @Test
    void aStackWithDropoutIsRefusedAtConfiguration() {
        try (Model model = Model.newInstance("transformer", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(encoder(0.1f), "mixed_bfloat16");
            model.setBlock(block);
            AmpException e =
                    assertThrows(
                            AmpException.class,
                            () ->
                                    Amp.configure(
                                            new DefaultTrainingConfig(
                                                    Loss.softmaxCrossEntropyLoss()),
                                            block,
                                            AmpOptions.builder()
                                                    .checkpointing(Checkpointing.stages())
                                                    .build()));
            assertTrue(e.getMessage().contains("Dropout of rate 0.1"), e.getMessage());
        }
    }
}
