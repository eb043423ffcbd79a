package io.github.djlamp.bench.train;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import org.junit.jupiter.api.Test;

/** The cap of the largest-batch search bounds what {@code --cap-on} says. */
class MemoryCommandTest {

    private static JsonObject probe(long readyKib, long firstStepPeakKib, long stepPeakKib) {
        JsonObject p = new JsonObject();
        p.addProperty("readyRssKib", readyKib);
        p.addProperty("stepPeakKib", stepPeakKib);
        p.addProperty("processPeakKib", Math.max(firstStepPeakKib, stepPeakKib));
        return p;
    }

    @Test
    void stepCapBoundsPeakMinusReadyAndIgnoresTheFirstStep() {
        // ready 300 MiB, first step 1200 MiB, second step 800 MiB: 500 MiB of step memory
        JsonObject p = probe(300 << 10, 1200 << 10, 800 << 10);
        assertTrue(MemoryCommand.fitsUnder(p, 500 << 10, "step"));
        assertFalse(MemoryCommand.fitsUnder(p, 499 << 10, "step"));
        assertFalse(MemoryCommand.fitsUnder(p, 1199 << 10, "process"));
        assertTrue(MemoryCommand.fitsUnder(p, 1200 << 10, "process"));
    }

    @Test
    void aFailedProbeNeverFits() {
        JsonObject failed = new JsonObject();
        failed.addProperty("error", "child JVM exited with 137");
        assertFalse(MemoryCommand.fitsUnder(failed, Long.MAX_VALUE, "step"));
        assertFalse(MemoryCommand.fitsUnder(failed, Long.MAX_VALUE, "process"));
    }
}
