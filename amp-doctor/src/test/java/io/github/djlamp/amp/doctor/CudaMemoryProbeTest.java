package io.github.djlamp.amp.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import org.junit.jupiter.api.Test;

class CudaMemoryProbeTest {

    private static final long MIB = 1L << 20;

    /** One training step: activations allocated, then freed at the end of the step. */
    private static void step(MemoryProbe probe, FakeCachingAllocator gpu, long activations) {
        probe.stepStarted();
        gpu.allocate(activations);
        gpu.free(activations);
        probe.stepEnded();
    }

    /** A run as the doctor makes it: model, release, training steps, memory steps, model closed. */
    private static MemoryProbe run(FakeCachingAllocator gpu, long model, long activations) {
        MemoryProbe probe = new CudaMemoryProbe(Device.gpu(0), gpu::used, gpu::emptyCache);
        gpu.allocate(model);
        probe.release();
        for (int i = 0; i < 3; i++) {
            step(probe, gpu, activations);
        }
        probe.release();
        step(probe, gpu, activations);
        gpu.free(model);
        return probe;
    }

    @Test
    void aStepsPeakIsWhatTheAllocatorReservedDuringItFromAnEmptiedCache() {
        FakeCachingAllocator gpu = new FakeCachingAllocator();
        MemoryProbe probe = run(gpu, 100 * MIB, 1000 * MIB);
        assertEquals(1000 * MIB, probe.getLastStepGrowthBytes());
        assertEquals(1100 * MIB, probe.getPeakBytes());
        assertTrue(probe.describe().contains("emptyCudaCache"), probe.describe());
    }

    @Test
    void theSecondRunDoesNotShowWhatTheFirstLeftCached() {
        FakeCachingAllocator gpu = new FakeCachingAllocator();
        MemoryProbe fp32 = run(gpu, 100 * MIB, 1000 * MIB);
        MemoryProbe bf16 = run(gpu, 100 * MIB, 500 * MIB);
        assertEquals(1100 * MIB, fp32.getPeakBytes());
        assertEquals(600 * MIB, bf16.getPeakBytes(), "fp32's cached blocks were handed back");
        assertEquals(500 * MIB, bf16.getLastStepGrowthBytes());
        assertEquals(4, gpu.timesEmptied(), "before each run and each memory step");
    }

    @Test
    void withoutACacheToEmptyNoStepPeakIsClaimed() {
        FakeCachingAllocator gpu = new FakeCachingAllocator();
        MemoryProbe probe = new CudaMemoryProbe(Device.gpu(0), gpu::used, null);
        probe.release();
        step(probe, gpu, 10 * MIB);
        assertEquals(-1, probe.getLastStepGrowthBytes());
        assertEquals(10 * MIB, probe.getPeakBytes());
        assertTrue(probe.describe().contains("could not be emptied"), probe.describe());
    }

    @Test
    void aDeviceThatCannotBeReadSaysSo() {
        MemoryProbe probe =
                new CudaMemoryProbe(
                        Device.gpu(0),
                        () -> {
                            throw new IllegalStateException("No GPU device detected.");
                        },
                        () -> {});
        step(probe, new FakeCachingAllocator(), MIB);
        assertEquals(-1, probe.getPeakBytes());
        assertEquals(-1, probe.getLastStepGrowthBytes());
        assertTrue(probe.describe().contains("No GPU device detected"), probe.describe());
    }

    @Test
    void aGpuGetsTheCudaProbeEmptyingLibtorchsCacheOnlyUnderPyTorch() {
        assertTrue(MemoryProbe.forDevice(Device.gpu(0), "PyTorch") instanceof CudaMemoryProbe);
        CudaMemoryProbe other =
                (CudaMemoryProbe) MemoryProbe.forDevice(Device.gpu(0), "OnnxRuntime");
        assertFalse(other.canEmptyCache());
    }
}
