package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * A user's own block: djl-amp cannot look into it, so it runs in fp32 and the first forward says so
 * with a per-layer summary; implementing {@code LowPrecisionSafe} opts it into 16-bit compute under
 * bf16. Run in a child JVM so that the log can be read (and a crash would fail only this test).
 */
class CustomBlockTest {

    private static String value(String output, String key) {
        for (String line : output.split("\\R")) {
            if (line.startsWith(key + " ")) {
                return line.substring(key.length() + 1).strip();
            }
        }
        throw new AssertionError("no '" + key + "' line in:\n" + output);
    }

    @Test
    void anOpaqueCustomBlockRunsInFp32AndTheFirstForwardWarnsWithASummary() throws Exception {
        String out =
                ForkedJvm.runOk(
                        java.util.List.of("-Xmx1g"),
                        CustomBlockScenario.class,
                        "opaque",
                        "mixed_bfloat16");
        System.out.println(out);
        assertEquals(value(out, "plain"), value(out, "amp"), "fp32, bit for bit");
        assertEquals("0.0", value(out, "lowShare"));
        assertTrue(out.contains("WARN"), out);
        assertTrue(out.contains("little of this model computes in bfloat16"), out);
        assertTrue(out.contains("LowPrecisionSafe"), out);
        assertTrue(out.contains("GatedUnit"), "the summary names the block:\n" + out);
        assertTrue(out.contains("opaque composite"), "and says why it is fp32:\n" + out);
    }

    @Test
    void aCustomBlockDeclaredLowPrecisionSafeComputesInBf16WithoutAWarning() throws Exception {
        String out =
                ForkedJvm.runOk(
                        java.util.List.of("-Xmx1g"),
                        CustomBlockScenario.class,
                        "marked",
                        "mixed_bfloat16");
        System.out.println(out);
        assertNotEquals(value(out, "plain"), value(out, "amp"), "computed in bf16");
        assertEquals("1.0", value(out, "lowShare"));
        assertFalse(out.contains("little of this model"), out);
    }

    @Test
    void aClassTheUserCannotChangeIsVouchedForInOneLine() throws Exception {
        String out =
                ForkedJvm.runOk(
                        java.util.List.of("-Xmx1g"),
                        CustomBlockScenario.class,
                        "trusted",
                        "mixed_bfloat16");
        System.out.println(out);
        assertNotEquals(value(out, "plain"), value(out, "amp"), "computed in bf16");
        assertEquals("1.0", value(out, "lowShare"));
        assertFalse(out.contains("little of this model"), out);
    }
}
