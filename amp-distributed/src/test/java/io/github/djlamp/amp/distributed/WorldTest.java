package io.github.djlamp.amp.distributed;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class WorldTest {

    @Test
    void launchersAreRecognizedByTheirEnvironment() {
        assertTrue(World.launchedByMpi(Map.of("OMPI_COMM_WORLD_SIZE", "2")));
        assertTrue(World.launchedByMpi(Map.of("SLURM_PROCID", "3")));
        assertTrue(World.launchedByMpi(Map.of("PMI_RANK", "0")));
        assertFalse(World.launchedByMpi(Map.of("HOME", "/root")));
    }

    @Test
    void withoutALauncherTheWorldIsOneProcess() {
        World world = World.local();
        assertEquals(0, world.getRank());
        assertEquals(1, world.getSize());
        assertTrue(world.isRoot());
        assertEquals(3, world.allReduceMax(new long[] {3}, "test")[0]);
    }

    @Test
    void gradientsAreBucketedInOrderUpToTheBucketSize() {
        try (NDManager manager = NDManager.newBaseManager()) {
            NDList grads = new NDList();
            for (int size : new int[] {100, 100, 300, 10, 10}) {
                grads.add(manager.zeros(new Shape(size)));
            }
            BucketedAllReduce reducer = new BucketedAllReduce(World.local(), 800);
            List<NDList> buckets = reducer.buckets(grads);
            // 400 + 400 bytes, then 1200 (larger than a bucket: alone), then 40 + 40
            assertEquals(3, buckets.size());
            assertEquals(2, buckets.get(0).size());
            assertEquals(1, buckets.get(1).size());
            assertEquals(2, buckets.get(2).size());
            assertEquals(5, new BucketedAllReduce(World.local(), 0).buckets(grads).size());
        }
    }

    @Test
    void badInputIsRejectedWithTheFix() {
        try (NDManager manager = NDManager.newBaseManager()) {
            BucketedAllReduce reducer = new BucketedAllReduce(World.local(), 800);
            NDList halfs = new NDList(manager.zeros(new Shape(4), DataType.FLOAT16));
            IllegalStateException e =
                    assertThrows(IllegalStateException.class, () -> reducer.buckets(halfs));
            assertTrue(e.getMessage().contains("fp32 gradients"), e.getMessage());
        }
        assertThrows(
                IllegalArgumentException.class, () -> new BucketedAllReduce(World.local(), -1));
        System.setProperty(World.TIMEOUT_PROPERTY, "soon");
        try {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, World::local);
            assertTrue(e.getMessage().contains("positive number of seconds"), e.getMessage());
        } finally {
            System.clearProperty(World.TIMEOUT_PROPERTY);
        }
        assertEquals(World.DEFAULT_TIMEOUT_SECONDS, World.local().getTimeout().toSeconds());
        IllegalArgumentException heap =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> World.requireDirect(ByteBuffer.allocate(8), 8));
        assertTrue(heap.getMessage().contains("direct buffer"), heap.getMessage());
    }
}
