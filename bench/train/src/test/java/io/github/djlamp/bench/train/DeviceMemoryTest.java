package io.github.djlamp.bench.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import com.google.gson.JsonObject;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * The first step's peak polled from a background thread, with a reader standing in for {@code
 * cudaMemGetInfo}: the most read while the step runs, though the reading after it is lower.
 */
class DeviceMemoryTest {

    private static final long BASELINE = 1_000;

    private final AtomicLong inUse = new AtomicLong(BASELINE);
    private final AtomicInteger reads = new AtomicInteger();
    private final AtomicReference<Thread> readBy = new AtomicReference<>();

    private long read() {
        reads.incrementAndGet();
        if (Thread.currentThread().isDaemon()) {
            readBy.set(Thread.currentThread());
        }
        return inUse.get();
    }

    /** Sets the memory in use and waits until the poller has read it. */
    private void rise(long bytes) throws InterruptedException {
        inUse.set(bytes);
        // two more readings: the second began after the set
        int target = reads.get() + 2;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (reads.get() < target) {
            assertTrue(System.nanoTime() < deadline, "the poller did not read");
            Thread.sleep(1);
        }
    }

    @Test
    void keepsTheHeightOfTheFirstStepThoughTheReadingAfterItIsLow() throws Exception {
        DeviceMemory memory = DeviceMemory.start(Device.gpu(), this::read);
        try (DeviceMemory.StepPoller poller = memory.pollFirstStep()) {
            rise(BASELINE + 6_000);
            // the end of djl-amp's first step: the cache emptied
            inUse.set(BASELINE + 1_300);
        }
        memory.sample();
        Thread poller = readBy.get();
        assertEquals("device-memory-first-step-poller", poller.getName());
        assertTrue(poller.isDaemon());
        poller.join(10_000);
        assertFalse(poller.isAlive(), "stopped at the step's end");
        memory.startSteady();
        inUse.set(BASELINE + 5_500);
        memory.sample();
        JsonObject json = memory.toJson();
        assertEquals(
                6_000, json.get("firstStepPeakAboveBaselineBytes").getAsLong(), json::toString);
        assertEquals(1_300, json.get("afterFirstStepAboveBaselineBytes").getAsLong());
        assertEquals(5_500, json.get("steadyPeakAboveBaselineBytes").getAsLong());
        // the after-step readings only: the first step's height is reported apart
        assertEquals(5_500, json.get("peakAboveBaselineBytes").getAsLong());
        assertTrue(json.get("method").getAsString().contains("firstStepPeakAboveBaselineBytes"));
    }

    @Test
    void includesTheReadingAfterTheStepAndTakesTheMostOverSeveralFirstSteps() throws Exception {
        DeviceMemory memory = DeviceMemory.start(Device.gpu(), this::read);
        try (DeviceMemory.StepPoller poller = memory.pollFirstStep()) {
            rise(BASELINE + 2_000);
        }
        memory.sample();
        // a second variant's first step, higher
        try (DeviceMemory.StepPoller poller = memory.pollFirstStep()) {
            rise(BASELINE + 3_000);
            inUse.set(BASELINE + 2_500);
        }
        memory.sample();
        assertEquals(3_000, memory.toJson().get("firstStepPeakAboveBaselineBytes").getAsLong());

        // a step shorter than one poll: the reading after it still counts
        DeviceMemory quick = DeviceMemory.start(Device.gpu(), () -> 7_000);
        quick.pollFirstStep().close();
        assertEquals(0, quick.toJson().get("firstStepPeakAboveBaselineBytes").getAsLong());
    }

    @Test
    void stopsWhenTheStepThrows() throws Exception {
        DeviceMemory memory = DeviceMemory.start(Device.gpu(), this::read);
        IllegalStateException thrown =
                assertThrows(
                        IllegalStateException.class,
                        () -> {
                            try (DeviceMemory.StepPoller poller = memory.pollFirstStep()) {
                                rise(BASELINE + 4_000);
                                throw new IllegalStateException("the step failed");
                            }
                        });
        assertEquals("the step failed", thrown.getMessage());
        readBy.get().join(10_000);
        assertFalse(readBy.get().isAlive());
        assertEquals(4_000, memory.toJson().get("firstStepPeakAboveBaselineBytes").getAsLong());
    }

    @Test
    void aFailedReadingEndsThePollingNotTheStep() {
        AtomicInteger calls = new AtomicInteger();
        DeviceMemory memory =
                DeviceMemory.start(
                        Device.gpu(),
                        () -> {
                            if (calls.getAndIncrement() > 0) {
                                throw new UnsatisfiedLinkError("no cudart");
                            }
                            return BASELINE;
                        });
        DeviceMemory.StepPoller poller = memory.pollFirstStep();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (poller.failure() == null) {
            assertTrue(System.nanoTime() < deadline, "the reading did not fail");
            Thread.onSpinWait();
        }
        poller.close();
        JsonObject json = memory.toJson();
        assertFalse(json.has("firstStepPeakAboveBaselineBytes"), json::toString);
        assertTrue(
                json.get("firstStepPeakError").getAsString().contains("no cudart"), json::toString);
    }

    @Test
    void noPeakWithoutAPolledStep() {
        DeviceMemory memory = DeviceMemory.start(Device.gpu(), this::read);
        memory.sample();
        assertFalse(memory.toJson().has("firstStepPeakAboveBaselineBytes"));
        assertNull(DeviceMemory.start(Device.cpu()), "not a GPU");
    }
}
