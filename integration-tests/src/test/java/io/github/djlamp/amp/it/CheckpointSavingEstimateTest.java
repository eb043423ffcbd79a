package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.cast.internal.CheckpointControl;
import io.github.djlamp.amp.cast.internal.CheckpointControl.SavingEstimate;
import io.github.djlamp.amp.policy.Checkpointing;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What checkpointing is expected to save is counted in the first step, from the shapes of the
 * arrays the segments keep and the activations their layers make, and reported once: exact bytes on
 * a chain whose arrays can be counted by hand, and the internals of a block with its own forward,
 * which the shadow tree does not see, counted too.
 */
class CheckpointSavingEstimateTest {

    private static final int BATCH = 4;

    private static Block chain() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(64).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(32).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(10).build());
    }

    /** The estimates after each step, and the start-of-training description after the last. */
    private record Steps(List<SavingEstimate> estimates, String description) {}

    private static Steps train(
            Block network, String policy, Checkpointing checkpointing, Shape input, int steps) {
        Engine.getInstance().setRandomSeed(5);
        try (Model model = Model.newInstance("checkpoint-saving", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(network, policy);
            model.setBlock(block);
            AmpOptions options = CheckpointingSetUp.options(policy, checkpointing).build();
            DefaultTrainingConfig config = CheckpointingSetUp.sgd(0.01f);
            CheckpointControl checkpoints = block.getTrainingLink().getCheckpoints();
            List<SavingEstimate> estimates = new ArrayList<>();
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options))) {
                trainer.initialize(input);
                assertNull(checkpoints.getSavingEstimate(), "no estimate before the first step");
                for (int i = 0; i < steps; i++) {
                    try (NDManager m = trainer.getManager().newSubManager()) {
                        NDArray x = m.randomUniform(-1f, 1f, input);
                        NDArray y = m.create(new float[] {0, 1, 2, 1});
                        Batch batch =
                                new Batch(m, new NDList(x), new NDList(y), BATCH, null, null, i, 1);
                        EasyTrain.trainBatch(trainer, batch);
                        trainer.step();
                    }
                    estimates.add(checkpoints.getSavingEstimate());
                }
            }
            return new Steps(estimates, checkpoints.describe());
        }
    }

    @Test
    void fp32ChainCountsEveryLayerOutputInsideTheSegmentsExactly() {
        Steps steps = train(chain(), "float32", Checkpointing.every(2), new Shape(BATCH, 16), 2);
        SavingEstimate first = steps.estimates().get(0);
        // segments [Linear 64, ReLU], [Linear 32, ReLU], [Linear 10]; fp32, 4 bytes an element
        assertEquals(3, first.segmentRuns());
        // dropped: each segment's layer outputs but its last (the segment's output, kept anyway)
        assertEquals(4L * (BATCH * 64) + 4L * (BATCH * 32), first.droppedBytes());
        // kept: the first segment's input and every segment's output
        assertEquals(4L * BATCH * (16 + 64 + 32 + 10), first.keptBytes());
        // the recomputation holds one segment's at a time: the first's is the largest
        assertEquals(4L * (BATCH * 64), first.largestSegmentBytes());
        assertEquals(4L * (BATCH * 32), first.upperBoundSavingBytes());
        assertSame(first, steps.estimates().get(1), "counted in the first step only");
        assertTrue(
                steps.description().contains("First step: 3 checkpointed segment runs kept"),
                steps.description());
    }

    @Test
    void bf16ChainCountsTheInputCastsAndTheHalvedActivations() {
        Steps steps =
                train(chain(), "mixed_bfloat16", Checkpointing.every(2), new Shape(BATCH, 16), 1);
        SavingEstimate first = steps.estimates().get(0);
        assertEquals(3, first.segmentRuns());
        // the first Linear's bf16 cast of the fp32 input, then 2-byte outputs as in fp32
        assertEquals(
                2L * (BATCH * 16) + 2L * (BATCH * 64) + 2L * (BATCH * 32), first.droppedBytes());
        // the fp32 input, then 2-byte segment outputs
        assertEquals(4L * BATCH * 16 + 2L * BATCH * (64 + 32 + 10), first.keptBytes());
        assertEquals(2L * (BATCH * 16) + 2L * (BATCH * 64), first.largestSegmentBytes());
    }

    @Test
    void theInternalsOfABlockWithItsOwnForwardAreCounted() {
        // each segment is one TransformerEncoderBlock (or a Linear) whose output is the segment's:
        // what it drops is what the block made inside, invisible to the shadow tree
        Steps steps =
                train(
                        CheckpointedCustomBlockTest.network(),
                        "float32",
                        Checkpointing.stages(),
                        new Shape(BATCH, 6, 8),
                        1);
        SavingEstimate first = steps.estimates().get(0);
        assertEquals(5, first.segmentRuns());
        long oneActivation = 4L * BATCH * 6 * 16;
        assertTrue(
                first.droppedBytes() > 2 * 5 * oneActivation,
                "two encoder blocks make more than five activations each inside, dropped "
                        + first.droppedBytes()
                        + " bytes");
    }
}
