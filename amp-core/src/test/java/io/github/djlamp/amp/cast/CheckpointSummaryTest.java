package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.cast.checkpoint.CheckpointPlan;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The precision summary marks the checkpointed segment of every unit inside one. */
class CheckpointSummaryTest {

    private static Block fiveStages() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(8).build())
                .add(Activation.reluBlock())
                .add(new SequentialBlock().add(Linear.builder().setUnits(8).build()))
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(2).build());
    }

    @Test
    void everyUnitNamesItsSegmentInForwardOrder() {
        Block root = fiveStages();
        PrecisionSummary summary =
                PrecisionSummary.of(
                        root,
                        PrecisionPolicy.mixedBfloat16(),
                        List.of(),
                        CheckpointPlan.resolve(Checkpointing.every(2), root));
        List<Integer> segments = new ArrayList<>();
        for (PrecisionSummary.Row row : summary.getRows()) {
            segments.add(row.getCheckpointSegment());
        }
        // stages 1-2, 3-4 (the nested Linear inside stage 3 included), 5
        assertEquals(List.of(1, 1, 2, 2, 3), segments);
        assertTrue(summary.toString().contains("[checkpointed segment 3]"), summary.toString());
    }

    @Test
    void withoutCheckpointingNoUnitIsInASegment() {
        Block root = fiveStages();
        for (PrecisionSummary.Row row :
                PrecisionSummary.of(root, PrecisionPolicy.mixedBfloat16()).getRows()) {
            assertEquals(0, row.getCheckpointSegment(), row.getPath());
        }
    }
}
