package io.github.djlamp.bench.train;

import com.google.gson.JsonObject;
import java.util.concurrent.locks.LockSupport;

/**
 * glibc's in-use bytes ({@link GlibcHeap}) over one training step: at forward start (the batch
 * made), at backward start (the loss computed), after the step ({@code trainer.step()} and {@code
 * batch.close()} done), and the step's peak: the largest of those and of a sampler thread's reads
 * every {@value #SAMPLE_MICROS} microseconds while the step runs. A peak between two reads can be
 * missed; the sampler narrows the gap, it does not close it.
 */
public final class StepMemory {

    /** The sampler's period. */
    static final long SAMPLE_MICROS = 200;

    private long forwardStart = -1;
    private long backwardStart = -1;
    private long afterStep = -1;
    private volatile long peak = -1;
    private volatile boolean running;
    private Thread sampler;

    /** Reads the forward-start value and starts the sampler; called by the rig. */
    void begin() {
        forwardStart = GlibcHeap.inUseBytes();
        peak = forwardStart;
        running = true;
        sampler =
                new Thread(
                        () -> {
                            while (running) {
                                record(GlibcHeap.inUseBytes());
                                LockSupport.parkNanos(SAMPLE_MICROS * 1000);
                            }
                        },
                        "step-memory-sampler");
        sampler.setDaemon(true);
        sampler.start();
    }

    /** Reads the backward-start value; called when the loss has been computed. */
    void backwardStart() {
        backwardStart = GlibcHeap.inUseBytes();
        record(backwardStart);
    }

    /** Stops the sampler and reads the after-step value; called by the rig. */
    void end() {
        running = false;
        try {
            sampler.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        afterStep = GlibcHeap.inUseBytes();
        record(afterStep);
    }

    private synchronized void record(long bytes) {
        if (bytes > peak) {
            peak = bytes;
        }
    }

    /**
     * Returns the step's reads, in bytes.
     *
     * @return forwardStartBytes, backwardStartBytes, peakBytes, afterStepBytes
     */
    public JsonObject toJson() {
        JsonObject json = new JsonObject();
        json.addProperty("forwardStartBytes", forwardStart);
        json.addProperty("backwardStartBytes", backwardStart);
        json.addProperty("peakBytes", peak);
        json.addProperty("afterStepBytes", afterStep);
        return json;
    }
}
