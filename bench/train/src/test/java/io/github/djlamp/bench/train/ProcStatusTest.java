package io.github.djlamp.bench.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Field;
import org.junit.jupiter.api.Test;

class ProcStatusTest {

    private static final String STATUS =
            "Name:\tjava\nVmPeak:\t 9000000 kB\nVmHWM:\t  812344 kB\nVmRSS:\t  700100 kB\n";

    @Test
    void readsFieldsInKib() {
        assertEquals(812344, ProcStatus.field(STATUS, "VmHWM"));
        assertEquals(700100, ProcStatus.field(STATUS, "VmRSS"));
        assertThrows(IllegalArgumentException.class, () -> ProcStatus.field(STATUS, "VmSwap"));
    }

    @Test
    void resettingThePeakForgetsMemoryFreedBefore() throws Exception {
        long size = 128L << 20;
        Field field = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe");
        field.setAccessible(true);
        Object unsafe = field.get(null);
        Class<?> type = unsafe.getClass();
        long rssBefore = ProcStatus.rssKib();
        // 128 MiB of native memory, made resident, then freed (malloc maps and unmaps it)
        long address = (long) type.getMethod("allocateMemory", long.class).invoke(unsafe, size);
        type.getMethod("setMemory", long.class, long.class, byte.class)
                .invoke(unsafe, address, size, (byte) 1);
        long peakWhileHeld = ProcStatus.peakKib();
        type.getMethod("freeMemory", long.class).invoke(unsafe, address);
        assertTrue(
                peakWhileHeld >= rssBefore + 120 * 1024,
                "peak " + peakWhileHeld + " KiB, resident before " + rssBefore + " KiB");
        long peakAfterFree = ProcStatus.peakKib();
        assertTrue(
                peakAfterFree >= peakWhileHeld - 8 * 1024,
                "the peak survives the free: " + peakAfterFree + " < " + peakWhileHeld);
        ProcStatus.resetPeak();
        long afterReset = ProcStatus.peakKib();
        assertTrue(
                afterReset < peakWhileHeld - 64 * 1024,
                "after the reset " + afterReset + " KiB, before " + peakWhileHeld + " KiB");
    }
}
