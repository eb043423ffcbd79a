package io.github.djlamp.amp.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import ai.djl.Device;
import org.junit.jupiter.api.Test;

class ProcessMemoryProbeTest {

    @Test
    void parsesProcStatusLines() {
        assertEquals(508252L * 1024, ProcessMemoryProbe.kilobytes("VmRSS:\t  508252 kB"));
        assertEquals(7L * 1024, ProcessMemoryProbe.kilobytes("VmHWM: 7 kB"));
    }

    @Test
    void aStepThatAllocatesShowsItsPeakAfterTheMemoryIsFreedAgain() {
        assumeTrue(ProcessMemoryProbe.isSupported(), "needs /proc/self/status (Linux)");
        ProcessMemoryProbe probe = new ProcessMemoryProbe();
        assumeTrue(probe.isResettable(), "needs a writable /proc/self/clear_refs");
        probe.release();
        probe.stepStarted();
        long before = ProcessMemoryProbe.residentBytes();
        int mib = 64;
        byte[] block = new byte[mib << 20];
        for (int i = 0; i < block.length; i += 4096) {
            block[i] = 1; // touch every page
        }
        long during = ProcessMemoryProbe.residentBytes();
        block = null;
        probe.stepEnded();
        assertTrue(during - before >= (mib - 8L) << 20, "the array became resident");
        assertTrue(
                probe.getLastStepGrowthBytes() >= (mib - 8L) << 20,
                "growth " + probe.getLastStepGrowthBytes() + " covers the 64 MiB array");
        assertTrue(probe.getPeakBytes() >= during - (1L << 20), "peak covers the array");
        assertTrue(probe.describe().contains("VmHWM"), probe.describe());
    }

    @Test
    void theCpuProbeIsTheProcessProbeOnLinux() {
        assumeTrue(ProcessMemoryProbe.isSupported(), "needs /proc/self/status (Linux)");
        assertTrue(MemoryProbe.forDevice(Device.cpu()) instanceof ProcessMemoryProbe);
    }

    @Test
    void theUnavailableProbeSaysWhy() {
        MemoryProbe probe = new UnavailableMemoryProbe("no way here");
        probe.stepStarted();
        probe.stepEnded();
        assertEquals(-1, probe.getPeakBytes());
        assertEquals(-1, probe.getLastStepGrowthBytes());
        assertEquals("not measured: no way here", probe.describe());
    }
}
