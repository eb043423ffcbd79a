package io.github.djlamp.amp.doctor;

import ai.djl.Device;
import ai.djl.util.cuda.CudaUtils;

/**
 * The memory in use on a CUDA device ({@code cudaMemGetInfo} through DJL's {@link CudaUtils}),
 * sampled at step boundaries.
 *
 * <p>PyTorch's caching allocator keeps what it reserved, so the memory in use after a step is close
 * to the most the steps so far needed; for the same reason the growth within one step cannot be
 * seen from outside and is not reported. This path was written for GPUs but not run: the project's
 * machines have none.
 */
final class CudaMemoryProbe implements MemoryProbe {

    private final Device device;
    private long peak = -1;
    private String failure;

    CudaMemoryProbe(Device device) {
        this.device = device;
    }

    @Override
    public void release() {}

    @Override
    public void stepStarted() {
        peak = Math.max(peak, used());
    }

    @Override
    public void stepEnded() {
        peak = Math.max(peak, used());
    }

    @Override
    public long getPeakBytes() {
        return peak;
    }

    @Override
    public long getLastStepGrowthBytes() {
        return -1;
    }

    @Override
    public String describe() {
        if (failure != null) {
            return "not measured: " + failure;
        }
        return "memory in use on " + device + " (cudaMemGetInfo, sampled at step boundaries)";
    }

    private long used() {
        if (failure != null) {
            return -1;
        }
        try {
            return CudaUtils.getGpuMemory(device).getUsed();
        } catch (RuntimeException e) {
            failure = "CUDA memory of " + device + " could not be read (" + e.getMessage() + ")";
            return -1;
        }
    }
}
