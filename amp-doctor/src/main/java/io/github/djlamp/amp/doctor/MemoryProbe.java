package io.github.djlamp.amp.doctor;

import ai.djl.Device;

/**
 * Measures the memory of training steps, bracketing each step with {@link #stepStarted()} and
 * {@link #stepEnded()}.
 *
 * <p>{@link #forDevice(Device, String)} picks the probe: on a CPU under Linux the process's
 * resident set (with the kernel's high-water mark reset before each step where the kernel allows
 * it), on a CUDA GPU the device memory in use (with libtorch's caching allocator emptied by {@link
 * #release()} under DJL's PyTorch engine), elsewhere none.
 */
public interface MemoryProbe {

    /**
     * Hands memory that was freed but is still held by the allocator back to the system where that
     * is possible, so that what is measured next is what is in use rather than what earlier work
     * left cached. Slow (tens of milliseconds): call it between runs and before a step measured for
     * its memory, never inside a timed loop.
     */
    void release();

    /** Called right before a step fetches its batch. */
    void stepStarted();

    /** Called right after a step has updated the weights and closed its batch. */
    void stepEnded();

    /**
     * Returns the highest memory in use seen during any step so far.
     *
     * @return bytes, or -1 when this probe cannot measure
     */
    long getPeakBytes();

    /**
     * Returns what the last step added at its peak to the memory in use when it started: its
     * activations, gradients, casts and temporaries. Meaningful after {@link #release()}; otherwise
     * memory cached by earlier steps hides part of it.
     *
     * @return bytes, or -1 when this probe cannot tell
     */
    long getLastStepGrowthBytes();

    /**
     * Describes what is measured and how, for reports.
     *
     * @return one short sentence
     */
    String describe();

    /**
     * Returns the probe for a device, assuming DJL's PyTorch engine.
     *
     * @param device the device the training runs on
     * @return a new probe
     */
    static MemoryProbe forDevice(Device device) {
        return forDevice(device, LibtorchCudaCache.ENGINE_NAME);
    }

    /**
     * Returns the probe for a device and engine.
     *
     * @param device the device the training runs on
     * @param engineName the DJL engine, e.g. {@code PyTorch}: on a GPU, which caching allocator
     *     {@link #release()} can empty
     * @return a new probe
     */
    static MemoryProbe forDevice(Device device, String engineName) {
        if (device.isGpu()) {
            return CudaMemoryProbe.of(device, engineName);
        }
        if (Device.Type.CPU.equals(device.getDeviceType()) && ProcessMemoryProbe.isSupported()) {
            return new ProcessMemoryProbe();
        }
        return new UnavailableMemoryProbe(
                "no memory probe for " + device + " on " + System.getProperty("os.name"));
    }
}
