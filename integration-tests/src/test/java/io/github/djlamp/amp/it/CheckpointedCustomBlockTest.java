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
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.train.AmpSession;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A checkpointed segment whose stage is a block with its own forward (DJL's {@code
 * TransformerEncoderBlock}): its forward without recording keeps none of what it makes inside, its
 * recomputation leaves nothing on the batch's manager, and the step's gradients are the
 * uncheckpointed step's (bitwise in bf16).
 */
class CheckpointedCustomBlockTest {

    private static final int BATCH = 4;
    private static final String ACTIVATIONS = "batch-sized arrays after the forward";
    private static final String RECOMPUTE_LEFT = "batch-sized arrays the recomputation left";

    static Block network() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(16).build())
                .add(new TransformerEncoderBlock(16, 2, 32, 0f, Activation::gelu))
                .add(new TransformerEncoderBlock(16, 2, 32, 0f, Activation::gelu))
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    static Map<String, float[]> oneStep(String policy, Checkpointing checkpointing) {
        Engine.getInstance().setRandomSeed(5);
        Map<String, float[]> result = new LinkedHashMap<>();
        try (Model model = Model.newInstance("checkpointed-custom", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(network(), policy);
            model.setBlock(block);
            AmpOptions options = CheckpointingSetUp.options(policy, checkpointing).build();
            DefaultTrainingConfig config = CheckpointingSetUp.sgd(0.1f);
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options));
                    NDManager batch = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(BATCH, 6, 8));
                AmpSession amp = AmpSession.of(trainer);
                NDArray x = batch.arange(BATCH * 6f * 8).reshape(BATCH, 6, 8).div(50f).sin();
                NDArray y = batch.create(new float[] {0, 1, 2, 1});
                int before = batchSized(batch);
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    NDList out = trainer.forward(new NDList(x));
                    result.put(ACTIVATIONS, new float[] {batchSized(batch) - before});
                    collector.backward(trainer.getLoss().evaluate(new NDList(y), out));
                }
                Set<NDArray> beforeRecompute = Collections.newSetFromMap(new IdentityHashMap<>());
                beforeRecompute.addAll(batch.getManagedArrays());
                amp.unscaleGradients();
                int left = 0;
                for (NDArray a : batch.getManagedArrays()) {
                    if (!beforeRecompute.contains(a) && isBatchSized(a)) {
                        left++;
                    }
                }
                result.put(RECOMPUTE_LEFT, new float[] {left});
                for (Pair<String, Parameter> pair : block.getParameters()) {
                    Parameter p = pair.getValue();
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

    private static int batchSized(NDManager manager) {
        int count = 0;
        for (NDArray a : manager.getManagedArrays()) {
            if (isBatchSized(a)) {
                count++;
            }
        }
        return count;
    }

    private static boolean isBatchSized(NDArray a) {
        if (a.isReleased()) {
            return false;
        }
        Shape s = a.getShape();
        return s.dimension() > 0 && s.get(0) == BATCH;
    }

    @ParameterizedTest
    @ValueSource(strings = {"float32", "mixed_bfloat16"})
    void theSegmentKeepsOnlyItsInputsAndOutputsAndTheGradientsAreBitwise(String policy) {
        Map<String, float[]> plain = oneStep(policy, Checkpointing.none());
        Map<String, float[]> checkpointed = oneStep(policy, Checkpointing.stages());
        float kept = checkpointed.remove(ACTIVATIONS)[0];
        float keptPlain = plain.remove(ACTIVATIONS)[0];
        float left = checkpointed.remove(RECOMPUTE_LEFT)[0];
        plain.remove(RECOMPUTE_LEFT);
        assertEquals(plain.keySet(), checkpointed.keySet());
        // bf16: bitwise. fp32: within 1e-5; its encoder gradients differ in the last bits with
        // checkpointing also without the scope (seen: 0.03505055 vs 0.035049997), not explained yet
        float delta = policy.equals("float32") ? 1e-5f : 0f;
        for (String name : plain.keySet()) {
            assertArrayEquals(plain.get(name), checkpointed.get(name), delta, policy + " " + name);
        }
        // per stage its output (a leaf), and the output's fp32 cast: an encoder block makes dozens
        assertTrue(
                kept <= 1 + network().getChildren().size(),
                policy
                        + ": "
                        + kept
                        + " batch-sized arrays left (without checkpointing "
                        + keptPlain
                        + ")");
        // the recomputation's arrays go with it: none is left on the batch's manager
        assertTrue(left <= 0, policy + ": the recomputation left " + left + " batch-sized arrays");
    }
}
