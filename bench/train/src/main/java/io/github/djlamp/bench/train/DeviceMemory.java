package io.github.djlamp.bench.train;

import ai.djl.Device;
import ai.djl.util.cuda.CudaUtils;
import com.google.gson.JsonObject;

/**
 * Peak memory in use on a CUDA device over a run, from {@code cudaMemGetInfo} (through DJL's {@link
 * CudaUtils}), read after every synchronized step.
 *
 * <p>libtorch's caching allocator is not reachable through DJL (no {@code max_memory_allocated}),
 * and it keeps what it reserved until the process ends: the memory in use after a step is the CUDA
 * context plus the most the allocator has reserved so far, so sampling at step ends sees the peak
 * reservation. Subtracting what was in use before the model was built (the context) leaves the peak
 * reserved by the run, comparable with PyTorch's {@code torch.cuda.max_memory_reserved()}.
 */
final class DeviceMemory {

    /** How the peak is measured, as written into the results. */
    static final String METHOD =
            "cudaMemGetInfo (total - free) after every synchronized step, minus the memory in use"
                    + " before the model was built (the CUDA context): the peak reserved by the"
                    + " caching allocator";

    private final Device device;
    private final long baselineBytes;
    private long peakBytes;
    private long firstStepBytes = -1;
    private long steadyPeakBytes = -1;

    private DeviceMemory(Device device, long baselineBytes) {
        this.device = device;
        this.baselineBytes = baselineBytes;
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
        return new DeviceMemory(device, used(device));
    }

    /** Reads the memory in use; call after a synchronized step. */
    void sample() {
        long now = used(device);
        peakBytes = Math.max(peakBytes, now);
        if (firstStepBytes < 0) {
            firstStepBytes = now;
        }
        if (steadyPeakBytes >= 0) {
            steadyPeakBytes = Math.max(steadyPeakBytes, now);
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
     * @return method, baseline, peak in use and peak above the baseline, in bytes
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
        if (steadyPeakBytes > 0) {
            json.addProperty("steadyPeakAboveBaselineBytes", steadyPeakBytes - baselineBytes);
        }
        return json;
    }

    private static long used(Device device) {
        return CudaUtils.getGpuMemory(device).getUsed();
    }
}
