package io.github.djlamp.bench.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class LoadTest {

    @Test
    void busyTicksLeaveOutIdleAndIowait() {
        // user nice system idle iowait irq softirq steal guest guest_nice
        String stat = "cpu  100 2 30 5000 40 5 6 7 0 0\ncpu0 50 1 15 2500 20 2 3 3 0 0\n";
        assertEquals(100 + 2 + 30 + 5 + 6 + 7, Load.machineBusyTicks(stat));
        assertThrows(IllegalArgumentException.class, () -> Load.machineBusyTicks("intr 1 2\n"));
    }

    @Test
    void processTicksSurviveSpacesAndParenthesesInTheName() {
        String stat =
                "4242 (java (main) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 123 45 0 0 20 0 30 0";
        assertEquals(123 + 45, Load.processTicks(stat));
    }

    @Test
    void otherCoresIsANumberOfCores() throws Exception {
        Load load = Load.start();
        Thread.sleep(300);
        double others = load.otherCores();
        assertTrue(
                others >= 0 && others <= Runtime.getRuntime().availableProcessors() + 0.5,
                "other processes kept " + others + " cores busy");
    }
}
