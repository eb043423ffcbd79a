package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The wrapper drops its handles to the activations the forward pass no longer reads, so that
 * PyTorch frees those autograd does not save: after a bf16 forward of ResNetV1-18 only the input,
 * the output and the step's weight casts stay on the batch's manager, and the output and the
 * gradients are bitwise those of a run that keeps every handle. The switch is read when the block
 * is wrapped.
 */
class IntermediateReleaseTest {

    private static final String PROPERTY = "djlamp.amp.releaseIntermediates";
    private static final int BATCH = 3; // no weight of the network has 3 as its first dimension
    private static final int RESIDUAL_UNITS = 8;

    @Test
    void forwardKeepsOnlyInputAndOutputAndGradientsStayBitwise() {
        Run kept = run(false);
        Run released = run(true);

        assertArrayEquals(kept.output, released.output, "the forward output");
        assertEquals(kept.gradients.size(), released.gradients.size());
        for (int i = 0; i < kept.gradients.size(); i++) {
            assertArrayEquals(kept.gradients.get(i), released.gradients.get(i), "gradient " + i);
        }
        // Every layer's output: conv, BatchNorm and ReLU outputs, the bf16 casts of the input.
        assertTrue(
                kept.activations > 4 * RESIDUAL_UNITS,
                "without the release every activation stays: " + kept.activations);
        // the input, the labels and the output: no layer's output, no join's sum, no cast
        assertTrue(
                released.activations <= 3,
                "with the release, batch-sized arrays left after forward: "
                        + released.activations
                        + " (without: "
                        + kept.activations
                        + ")");
    }

    /** The property is read once, by Amp.wrap: what it says during forward changes nothing. */
    @Test
    void theSettingIsReadWhenTheBlockIsWrapped() {
        Run kept = run(false, true);
        Run released = run(true, false);
        assertArrayEquals(kept.output, released.output, "the forward output");
        assertTrue(
                kept.activations > 4 * RESIDUAL_UNITS,
                "wrapped with the release off: " + kept.activations);
        assertTrue(
                released.activations <= 3, "wrapped with the release on: " + released.activations);
    }

    /**
     * A model wrapped with the float32 policy gets the release too, with plain DJL's results bit
     * for bit: DJL keeps every BatchNorm output and residual sum until the batch closes.
     */
    @Test
    void float32GetsTheReleaseWithPlainDjlsResults() {
        Run plain = run(true, true, null);
        Run wrapped = run(true, true, "float32");
        assertArrayEquals(plain.output, wrapped.output, "the forward output");
        assertEquals(plain.gradients.size(), wrapped.gradients.size());
        for (int i = 0; i < plain.gradients.size(); i++) {
            assertArrayEquals(plain.gradients.get(i), wrapped.gradients.get(i), "gradient " + i);
        }
        assertTrue(
                plain.activations > 4 * RESIDUAL_UNITS,
                "plain DJL keeps every activation: " + plain.activations);
        assertTrue(
                wrapped.activations <= 3,
                "wrapped with float32, batch-sized arrays left after forward: "
                        + wrapped.activations);
    }

    private static Run run(boolean release) {
        return run(release, release);
    }

    private static Run run(boolean releaseWhenWrapped, boolean releaseDuringForward) {
        return run(releaseWhenWrapped, releaseDuringForward, "mixed_bfloat16");
    }

    /** One training forward and backward; {@code policy} null for the block unwrapped. */
    private static Run run(
            boolean releaseWhenWrapped, boolean releaseDuringForward, String policy) {
        String before = System.getProperty(PROPERTY);
        System.setProperty(PROPERTY, Boolean.toString(releaseWhenWrapped));
        Engine.getInstance().setRandomSeed(5);
        Block block =
                ResNetV1.builder()
                        .setImageShape(new Shape(1, 32, 32))
                        .setNumLayers(18)
                        .setOutSize(10)
                        .build();
        try (Model model = Model.newInstance("release-" + releaseWhenWrapped, "PyTorch")) {
            model.setBlock(policy == null ? block : Amp.wrap(block, policy));
            System.setProperty(PROPERTY, Boolean.toString(releaseDuringForward));
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build());
            try (Trainer trainer = model.newTrainer(config);
                    NDManager batch = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(BATCH, 1, 32, 32));
                NDArray x = batch.randomUniform(0f, 1f, new Shape(BATCH, 1, 32, 32));
                NDArray y = batch.create(new float[] {1, 4, 7});
                Run result = new Run();
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    NDList out = trainer.forward(new NDList(x));
                    result.activations = batchSized(batch);
                    result.output = out.singletonOrThrow().toFloatArray();
                    collector.backward(trainer.getLoss().evaluate(new NDList(y), out));
                }
                for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
                    if (p.getValue().requiresGradient()) {
                        result.gradients.add(p.getValue().getArray().getGradient().toFloatArray());
                    }
                }
                return result;
            }
        } finally {
            if (before == null) {
                System.clearProperty(PROPERTY);
            } else {
                System.setProperty(PROPERTY, before);
            }
        }
    }

    /** Open arrays on the batch's manager whose first dimension is the batch: activations. */
    private static int batchSized(NDManager manager) {
        int count = 0;
        for (NDArray a : manager.getManagedArrays()) {
            Shape s = a.getShape();
            if (!a.isReleased() && s.dimension() > 0 && s.get(0) == BATCH) {
                count++;
            }
        }
        return count;
    }

    private static final class Run {
        int activations;
        float[] output;
        final List<float[]> gradients = new ArrayList<>();
    }
}
