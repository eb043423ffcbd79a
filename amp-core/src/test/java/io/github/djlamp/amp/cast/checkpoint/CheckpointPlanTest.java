package io.github.djlamp.amp.cast.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.Dropout;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Checkpointing;
import java.util.List;
import java.util.Properties;
import org.junit.jupiter.api.Test;

/** Checkpointing settings are resolved against the tree, and refused with the fix named. */
class CheckpointPlanTest {

    private static Block residual() {
        return new ParallelBlock(
                list -> list.get(0),
                List.of(
                        new SequentialBlock()
                                .add(Linear.builder().setUnits(8).build())
                                .add(Activation.reluBlock()),
                        Blocks.identityBlock()));
    }

    private static Block model(float dropout) {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(8).build())
                .add(residual())
                .add(
                        new SequentialBlock()
                                .add(Linear.builder().setUnits(8).build())
                                .add(Dropout.builder().optRate(dropout).build()))
                .add(Linear.builder().setUnits(2).build());
    }

    @Test
    void stagesEveryAndAutoGroupTheRootsChildren() {
        Block root = model(0f);
        assertEquals(4, CheckpointPlan.resolve(Checkpointing.stages(), root).segmentCount());
        assertEquals(2, CheckpointPlan.resolve(Checkpointing.every(3), root).segmentCount());
        // round(sqrt(4)) = 2 stages a segment
        assertEquals(2, CheckpointPlan.resolve(Checkpointing.auto(), root).segmentCount());
        assertEquals(0, CheckpointPlan.resolve(Checkpointing.none(), root).segmentCount());
    }

    @Test
    void selectorsReachNestedSequentialBlocksAndWholeResidualUnits() {
        Block root = model(0f);
        CheckpointPlan plan =
                CheckpointPlan.resolve(
                        Checkpointing.blocks(
                                "path:03SequentialBlock/01Linear", "class:ParallelBlock"),
                        root);
        assertEquals(2, plan.segmentCount());
        assertEquals(1, plan.groupsOf("03SequentialBlock").size());
        assertEquals(1, plan.groupsOf("").size());
    }

    @Test
    void aPathThatMatchesNothingIsRefusedListingTheStages() {
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () ->
                                CheckpointPlan.resolve(
                                        Checkpointing.blocks("path:07Nothing"), model(0f)));
        assertTrue(e.getMessage().contains("matches no block"), e.getMessage());
        assertTrue(e.getMessage().contains("02ParallelBlock"), e.getMessage());
    }

    @Test
    void aBlockInsideAParallelBlockIsRefusedNamingTheStageToCheckpoint() {
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () ->
                                CheckpointPlan.resolve(
                                        Checkpointing.blocks(
                                                "path:02ParallelBlock/01SequentialBlock"),
                                        model(0f)));
        assertTrue(e.getMessage().contains("ParallelBlock, whose branches"), e.getMessage());
        assertTrue(e.getMessage().contains("path:02ParallelBlock"), e.getMessage());
    }

    @Test
    void aClassThatAlsoNamesBlocksInsideAParallelBlockIsRefusedNotHalfApplied() {
        // four Linears: three reached through SequentialBlocks, one inside the residual unit
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () ->
                                CheckpointPlan.resolve(
                                        Checkpointing.blocks("class:Linear"), model(0f)));
        assertTrue(e.getMessage().contains("names 4 blocks, and 1 of them"), e.getMessage());
        assertTrue(
                e.getMessage().contains("'02ParallelBlock/01SequentialBlock/01Linear'"),
                e.getMessage());
        assertTrue(e.getMessage().contains("path:02ParallelBlock"), e.getMessage());
        // the residual unit checkpointed as a whole covers its Linear
        assertEquals(
                4,
                CheckpointPlan.resolve(
                                Checkpointing.blocks("class:Linear", "class:ParallelBlock"),
                                model(0f))
                        .segmentCount());
    }

    @Test
    void stagesOfARootThatIsNoSequentialBlockAreRefused() {
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () -> CheckpointPlan.resolve(Checkpointing.stages(), residual()));
        assertTrue(e.getMessage().contains("Checkpointing.blocks"), e.getMessage());
    }

    @Test
    void aDropoutThatDropsIsRefusedAndRateZeroIsAccepted() {
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () -> CheckpointPlan.resolve(Checkpointing.stages(), model(0.1f)));
        assertTrue(e.getMessage().contains("Dropout of rate 0.1"), e.getMessage());
        assertTrue(e.getMessage().contains("03SequentialBlock"), e.getMessage());
        // the dropout's stage left out: accepted
        assertEquals(
                1,
                CheckpointPlan.resolve(Checkpointing.blocks("path:01Linear"), model(0.1f))
                        .segmentCount());
        assertEquals(4, CheckpointPlan.resolve(Checkpointing.stages(), model(0f)).segmentCount());
    }

    @Test
    void theTextAndPropertiesFormsRoundTrip() {
        for (Checkpointing c :
                new Checkpointing[] {
                    Checkpointing.none(),
                    Checkpointing.stages(),
                    Checkpointing.every(3),
                    Checkpointing.auto(),
                    Checkpointing.blocks("class:Linear", "path:02ParallelBlock")
                }) {
            assertEquals(c, Checkpointing.parse(c.toString()));
        }
        Properties properties = new Properties();
        assertEquals(Checkpointing.none(), Checkpointing.fromProperties(properties));
        properties.setProperty(Checkpointing.PROPERTY, "every:2");
        assertEquals(Checkpointing.every(2), Checkpointing.fromProperties(properties));
        IllegalArgumentException bad =
                assertThrows(IllegalArgumentException.class, () -> Checkpointing.parse("most"));
        assertTrue(bad.getMessage().contains("every:N"), bad.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Checkpointing.every(0));
        assertThrows(IllegalArgumentException.class, () -> Checkpointing.parse("every:x"));
        assertThrows(IllegalArgumentException.class, () -> Checkpointing.blocks("Linear"));
    }
}
