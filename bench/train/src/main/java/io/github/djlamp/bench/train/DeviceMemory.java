package io.github.djlamp.bench.train;

import ai.djl.Device;
import ai.djl.util.cuda.CudaUtils;
import com.google.gson.JsonObject;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * Peak memory in use on a CUDA device over a run, from {@code cudaMemGetInfo} (through DJL's {@link
 * CudaUtils}), read after every synchronized step, and polled during the first step.
 *
 * <p>libtorch's caching allocator is not reachable through DJL (no {@code max_memory_allocated}),
 * and it keeps what it reserved until the process ends: the memory in use after a step is the CUDA
 * context plus the most the allocator has reserved so far, so sampling at step ends sees the peak
 * reservation. Subtracting what was in use before the model was built (the context) leaves the peak
 * reserved by the run, comparable with PyTorch's {@code torch.cuda.max_memory_reserved()}.
 *
 * <p>The first step is the exception: djl-amp empties the caching allocator at its end (after the
 * kernel checks), so the reading after it is low and says nothing of its height. Within the step
 * the reservation only grows up to that point, so the most in use while it runs, polled from a
 * background thread ({@link #pollFirstStep()}), is the first step's peak reservation.
 */
final class DeviceMemory {

    /** How the peak is measured, as written into the results. */
    static final String METHOD =
            "cudaMemGetInfo (total - free) after every synchronized step, minus the memory in use"
                    + " before the model was built (the CUDA context): the peak reserved by the"
                    + " caching allocator; the first step's peak (firstStepPeakAboveBaselineBytes)"
                    + " is cudaMemGetInfo polled every "
                    + TimeUnit.NANOSECONDS.toMillis(StepPoller.INTERVAL_NANOS)
                    + " ms from a background thread while the first step runs, and once after it,"
                    + " minus the same baseline";

    private final Device device;
    private final LongSupplier reader;
    private final long baselineBytes;
    private long peakBytes;
    private long firstStepBytes = -1;
    private long steadyPeakBytes = -1;
    private long firstStepPeakBytes = -1;
    private String firstStepPeakError;

    private DeviceMemory(Device device, LongSupplier reader) {
        this.device = device;
        this.reader = reader;
        this.baselineBytes = reader.getAsLong();
        this.peakBytes = baselineBytes;
    }

    /**
     * Starts measuring on a device: reads the memory in use now as the baseline.
     *
     * @param device the device the run trains on
     * @return the probe, or null on a device that is not a GPU
     */
    static DeviceMemory start(Device device) {
        if (!device.isGpu()) {
            return null;
        }
        return new DeviceMemory(device, () -> used(device));
    }

    /**
     * Starts measuring with another reader of the memory in use (tests: no GPU needed).
     *
     * @param device the device named in the results
     * @param reader the bytes in use now; read once here as the baseline
     * @return the probe
     */
    static DeviceMemory start(Device device, LongSupplier reader) {
        return new DeviceMemory(device, reader);
    }

    /** Reads the memory in use; call after a synchronized step. */
    void sample() {
        long now = reader.getAsLong();
        peakBytes = Math.max(peakBytes, now);
        if (firstStepBytes < 0) {
            firstStepBytes = now;
        }
        if (steadyPeakBytes >= 0) {
            steadyPeakBytes = Math.max(steadyPeakBytes, now);
        }
    }

    /**
     * Starts polling the memory in use on a daemon thread for one first step (one a variant where
     * several share the process); close the poller when the step ends, also when it throws. The
     * most read, the reading after the step included, goes into {@code
     * firstStepPeakAboveBaselineBytes}: the most over all first steps polled.
     *
     * @return the running poller
     */
    StepPoller pollFirstStep() {
        return new StepPoller(reader, this::addFirstStep);
    }

    private void addFirstStep(StepPoller poller) {
        if (poller.failure() != null) {
            if (firstStepPeakError == null) {
                firstStepPeakError = poller.failure();
            }
        } else if (poller.maxBytes() >= 0) {
            firstStepPeakBytes = Math.max(firstStepPeakBytes, poller.maxBytes());
        }
    }

    /**
     * Starts the steady part of the run (call after the warm-up steps): the most in use after the
     * steps from here on is reported apart from the first step's reading, which includes what the
     * first step alone made (djl-amp's kernel checks, the first kernels' workspaces) unless it was
     * given back.
     */
    void startSteady() {
        steadyPeakBytes = 0;
    }

    /**
     * Returns the measurement as JSON.
     *
     * @return method, baseline, peak in use and peak above the baseline, in bytes; where measured,
     *     the first step's peak and the reading after it, and the steady steps' peak, above the
     *     baseline
     */
    JsonObject toJson() {
        JsonObject json = new JsonObject();
        json.addProperty("method", METHOD);
        json.addProperty("device", device.toString());
        json.addProperty("baselineBytes", baselineBytes);
        json.addProperty("peakUsedBytes", peakBytes);
        json.addProperty("peakAboveBaselineBytes", peakBytes - baselineBytes);
        if (firstStepBytes >= 0) {
            json.addProperty("afterFirstStepAboveBaselineBytes", firstStepBytes - baselineBytes);
        }
        if (firstStepPeakError != null) {
            // a partial maximum would read as a low peak: leave the number out
            json.addProperty("firstStepPeakError", firstStepPeakError);
        } else if (firstStepPeakBytes >= 0) {
            json.addProperty("firstStepPeakAboveBaselineBytes", firstStepPeakBytes - baselineBytes);
        }
        if (steadyPeakBytes > 0) {
            json.addProperty("steadyPeakAboveBaselineBytes", steadyPeakBytes - baselineBytes);
        }
        return json;
    }

    private static long used(Device device) {
        return CudaUtils.getGpuMemory(device).getUsed();
    }

    /**
     * The most a reader returns while one step runs: a daemon thread reads it every {@link
     * #INTERVAL_NANOS} until {@link #close()}, which stops and joins the thread and reads once more
     * (after a synchronized step: the reading after it). A failure to read stops the polling and is
     * kept as a message instead of a maximum; it never reaches the step.
     */
    static final class StepPoller implements AutoCloseable {

        /** How often the thread reads. */
        static final long INTERVAL_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

        private static final long JOIN_MILLIS = 10_000;

        private final LongSupplier reader;
        private final Consumer<StepPoller> onClose;
        private final Thread thread;
        private volatile boolean stopping;
        private volatile long maxBytes = -1;
        private volatile String failure;
        private boolean closed;

        StepPoller(LongSupplier reader, Consumer<StepPoller> onClose) {
            this.reader = reader;
            this.onClose = onClose;
            thread = new Thread(this::poll, "device-memory-first-step-poller");
            thread.setDaemon(true);
            thread.start();
        }

        private void poll() {
            try {
                while (!stopping) {
                    read();
                    LockSupport.parkNanos(INTERVAL_NANOS);
                }
            } catch (Throwable t) {
                // JNA's link errors included: a failed reading ends the polling, never the run
                failure = "polling failed: " + t;
            }
        }

        private void read() {
            long now = reader.getAsLong();
            if (now > maxBytes) {
                maxBytes = now;
            }
        }

        /**
         * Returns the most read.
         *
         * @return bytes, or -1 before any reading
         */
        long maxBytes() {
            return maxBytes;
        }

        /**
         * Returns why the polling stopped early.
         *
         * @return the failure, or null if there was none
         */
        String failure() {
            return failure;
        }

        /** Stops and joins the thread, reads once more, and hands the result over. */
        @Override
        public void close() {
            if (closed) {
                return;
            }
            closed = true;
            stopping = true;
            LockSupport.unpark(thread);
            try {
                thread.join(JOIN_MILLIS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (thread.isAlive()) {
                // a reader stuck in a call: its maximum is still being written
                failure = "polling did not stop within " + JOIN_MILLIS + " ms";
            } else if (failure == null) {
                try {
                    read();
                } catch (RuntimeException e) {
                    failure = "reading after the step failed: " + e;
                }
            }
            onClose.accept(this);
        }
    }
}
