package io.github.djlamp.amp.doctor;

import ai.djl.Device;
import ai.djl.util.cuda.CudaUtils;
import java.util.function.LongSupplier;

/**
 * The memory in use on a CUDA device ({@code cudaMemGetInfo}, through DJL's {@link CudaUtils}),
 * read at step boundaries, with libtorch's caching allocator emptied by {@link #release()}.
 *
 * <p>libtorch exposes no peak-memory statistic to DJL, but its caching allocator makes one readable
 * from outside: it keeps every block it reserved until it is emptied, so within a step the memory
 * in use only grows, up to the most the step held at once (rounded to the allocator's blocks). Read
 * after a step that started from an emptied cache, the growth is that step's peak: activations,
 * gradients, casts, workspaces and temporaries. For the same reason the memory in use at step
 * boundaries during training is the run's peak so far. The figures are the whole device: the CUDA
 * context and other processes on the same GPU count too.
 */
final class CudaMemoryProbe implements MemoryProbe {

    private final Device device;
    private final LongSupplier usedBytes;
    private final Runnable emptyCache;
    private long startUsed = -1;
    private long peak = -1;
    private long lastGrowth = -1;
    private String failure;

    /**
     * Creates a probe.
     *
     * @param device the GPU
     * @param usedBytes the memory in use on the device now
     * @param emptyCache empties the engine's caching allocator, or null where that is not possible
     */
    CudaMemoryProbe(Device device, LongSupplier usedBytes, Runnable emptyCache) {
        this.device = device;
        this.usedBytes = usedBytes;
        this.emptyCache = emptyCache;
    }

    /** Returns the probe of a GPU that an engine trains on. */
    static CudaMemoryProbe of(Device device, String engineName) {
        return new CudaMemoryProbe(
                device,
                () -> CudaUtils.getGpuMemory(device).getUsed(),
                LibtorchCudaCache.emptier(engineName));
    }

    /** Returns whether {@link #release()} empties the engine's caching allocator. */
    boolean canEmptyCache() {
        return emptyCache != null;
    }

    @Override
    public void release() {
        if (emptyCache != null && failure == null) {
            try {
                emptyCache.run();
            } catch (RuntimeException e) {
                failure = "the CUDA cache of " + device + " could not be emptied (" + e + ")";
            }
        }
    }

    @Override
    public void stepStarted() {
        startUsed = used();
        peak = Math.max(peak, startUsed);
    }

    @Override
    public void stepEnded() {
        long end = used();
        peak = Math.max(peak, end);
        lastGrowth = canEmptyCache() && startUsed >= 0 && end >= 0 ? end - startUsed : -1;
    }

    @Override
    public long getPeakBytes() {
        return failure == null ? peak : -1;
    }

    @Override
    public long getLastStepGrowthBytes() {
        return failure == null ? lastGrowth : -1;
    }

    @Override
    public String describe() {
        if (failure != null) {
            return "not measured: " + failure;
        }
        String what =
                "device memory in use on "
                        + device
                        + " (cudaMemGetInfo at step boundaries: the whole GPU, CUDA context and"
                        + " other processes included)";
        if (canEmptyCache()) {
            return what
                    + "; libtorch's CUDA cache emptied (emptyCudaCache) before each run and each"
                    + " memory step, so a step's growth is its peak as the caching allocator"
                    + " reserved it";
        }
        return what
                + "; the engine's CUDA cache could not be emptied (not DJL's PyTorch engine), so"
                + " later runs may show memory cached by earlier ones and no step peak is given";
    }

    private long used() {
        if (failure != null) {
            return -1;
        }
        try {
            return usedBytes.getAsLong();
        } catch (RuntimeException e) {
            failure = "CUDA memory of " + device + " could not be read (" + e.getMessage() + ")";
            return -1;
        }
    }
}
