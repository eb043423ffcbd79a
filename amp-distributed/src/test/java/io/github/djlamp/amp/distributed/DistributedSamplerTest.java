package io.github.djlamp.amp.distributed;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDManager;
import ai.djl.training.dataset.ArrayDataset;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class DistributedSamplerTest {

    private static List<List<Long>> epoch(DistributedSampler sampler, ArrayDataset dataset) {
        List<List<Long>> batches = new ArrayList<>();
        Iterator<List<Long>> it = sampler.sample(dataset);
        it.forEachRemaining(batches::add);
        return batches;
    }

    @Test
    void ranksTakeDisjointSlicesWhoseUnionIsTheGlobalBatch() {
        try (NDManager manager = NDManager.newBaseManager()) {
            ArrayDataset dataset = TrainingJob.dataset(manager, 103).setSampling(1, false).build();
            int ranks = 4;
            int global = 20;
            List<List<List<Long>>> perRank = new ArrayList<>();
            for (int rank = 0; rank < ranks; rank++) {
                DistributedSampler sampler = new DistributedSampler(global, true, 5, rank, ranks);
                assertEquals(5, sampler.getBatchSize());
                epoch(sampler, dataset); // epoch 0
                perRank.add(epoch(sampler, dataset)); // epoch 1
            }
            DistributedSampler single = new DistributedSampler(global, true, 5, 0, 1);
            epoch(single, dataset);
            List<List<Long>> reference = epoch(single, dataset);
            assertEquals(103 / 20, reference.size(), "the incomplete last global batch is dropped");
            Set<Long> seen = new HashSet<>();
            for (int step = 0; step < reference.size(); step++) {
                List<Long> union = new ArrayList<>();
                for (int rank = 0; rank < ranks; rank++) {
                    List<Long> shard = perRank.get(rank).get(step);
                    assertEquals(5, shard.size());
                    union.addAll(shard);
                }
                assertEquals(reference.get(step), union, "step " + step);
                for (Long index : union) {
                    assertTrue(seen.add(index), "index " + index + " twice in one epoch");
                }
            }
        }
    }

    @Test
    void eachEpochShufflesDifferentlyTheSameOnEveryRank() {
        try (NDManager manager = NDManager.newBaseManager()) {
            ArrayDataset dataset = TrainingJob.dataset(manager, 64).setSampling(1, false).build();
            DistributedSampler a = new DistributedSampler(8, true, 9, 1, 2);
            DistributedSampler b = new DistributedSampler(8, true, 9, 1, 2);
            List<List<Long>> first = epoch(a, dataset);
            assertEquals(first, epoch(b, dataset));
            assertNotEquals(first, epoch(a, dataset));
            DistributedSampler ordered = new DistributedSampler(8, false, 9, 1, 2);
            assertEquals(List.of(4L, 5L, 6L, 7L), epoch(ordered, dataset).get(0));
            assertFalse(epoch(ordered, dataset).isEmpty());
        }
    }

    @Test
    void aResumedRunSetsTheEpochAndTakesTheOrderTheUninterruptedRunTakes() {
        try (NDManager manager = NDManager.newBaseManager()) {
            ArrayDataset dataset = TrainingJob.dataset(manager, 64).setSampling(1, false).build();
            DistributedSampler uninterrupted = new DistributedSampler(8, true, 9, 1, 2);
            epoch(uninterrupted, dataset);
            epoch(uninterrupted, dataset);
            DistributedSampler resumed = new DistributedSampler(8, true, 9, 1, 2);
            resumed.setEpoch(2);
            assertEquals(epoch(uninterrupted, dataset), epoch(resumed, dataset));
            assertEquals(3, resumed.getEpoch());
            assertThrows(IllegalArgumentException.class, () -> resumed.setEpoch(-1));
        }
    }

    @Test
    void aGlobalBatchThatRanksCannotShareIsRejected() {
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> new DistributedSampler(10, true, 0, 0, 4));
        assertTrue(e.getMessage().contains("multiple of the number of ranks (4)"), e.getMessage());
        assertThrows(
                IllegalArgumentException.class, () -> new DistributedSampler(8, true, 0, 4, 4));
    }

    @Test
    void aDatasetSmallerThanOneGlobalBatchIsRefusedInsteadOfTrainingNothing() {
        try (NDManager manager = NDManager.newBaseManager()) {
            ArrayDataset dataset = TrainingJob.dataset(manager, 5).setSampling(1, false).build();
            DistributedSampler sampler = new DistributedSampler(8, true, 5, 0, 2);
            IllegalArgumentException e =
                    assertThrows(IllegalArgumentException.class, () -> sampler.sample(dataset));
            assertTrue(
                    e.getMessage()
                            .startsWith(
                                    "The dataset has 5 examples, fewer than one global"
                                            + " batch of 8: every epoch would train 0 steps"),
                    e.getMessage());
            assertTrue(
                    e.getMessage().contains("at most 5 (a multiple of the 2 ranks)"),
                    e.getMessage());
        }
    }
}
