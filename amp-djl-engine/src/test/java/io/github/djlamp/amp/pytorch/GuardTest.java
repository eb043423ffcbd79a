package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The guards run in a child JVM: a native crash there fails this test, not the build. */
class GuardTest {

    @Test
    void guardsThrowInsteadOfKillingTheJvm() throws Exception {
        ForkedJvm.Result result = ForkedJvm.run(GuardScenarios.class);
        assertEquals(0, result.exitCode, result.output);
        assertTrue(result.output.contains("ALL GUARDS HELD"), result.output);
        assertTrue(result.output.contains("backward guard threw"), result.output);
        assertTrue(result.output.contains("Cast it to fp32 first"), result.output);
    }

    @Test
    void theHarnessNoticesARealCrash() throws Exception {
        ForkedJvm.Result result = ForkedJvm.run(GuardScenarios.class, "crash");
        assertNotEquals(0, result.exitCode, result.output);
        assertTrue(!result.output.contains("DJL did not crash"), result.output);
    }
}
