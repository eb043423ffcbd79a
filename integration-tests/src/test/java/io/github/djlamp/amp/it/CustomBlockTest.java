package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * A user's own block: where djl-amp reads its forward as safe it computes in 16 bits; where it
 * cannot, it runs in fp32 and the first forward says so with a per-layer summary, and implementing
 * {@code LowPrecisionSafe} opts it into 16-bit compute under bf16. Run in a child JVM so that the
 * log can be read (and a crash would fail only this test).
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
        assertTrue(value(out, "arithmetic").startsWith("0.0% of"), out);
        assertTrue(out.contains("WARN"), out);
        assertTrue(out.contains("little of this model's arithmetic ran in bfloat16"), out);
        assertTrue(out.contains("LowPrecisionSafe"), out);
        assertTrue(out.contains("OpaqueGatedUnit"), "the summary names the block:\n" + out);
        assertTrue(out.contains("opaque composite"), "and says why it is fp32:\n" + out);
        assertTrue(
                out.contains("djl-amp read its code and stopped: its forward calls"),
                "and where reading its code stopped:\n" + out);
    }

    /** The gated unit itself calls its layers, sigmoid and mul only: djl-amp reads it as safe. */
    @Test
    void aCustomBlockWhoseForwardDjlAmpReadsComputesInBf16WithoutAWarning() throws Exception {
        assertComputesAllInBf16("read");
    }

    @Test
    void inATrainerTheWarningComesAfterTheFirstStepCountedInArithmetic() throws Exception {
        String out =
                ForkedJvm.runOk(
                        java.util.List.of(
                                "-Xmx1g", "-Dorg.slf4j.simpleLogger.log.io.github.djlamp=info"),
                        CustomBlockScenario.class,
                        "trainer",
                        "mixed_bfloat16");
        System.out.println(out);
        int initialized = out.indexOf("initialized");
        int warning = out.indexOf("little of this model's arithmetic ran in bfloat16");
        assertTrue(initialized >= 0 && warning > initialized, "warned after initialize:\n" + out);
        // the unit's two 16x32 weights on 4 rows: 2 x 1024 x 4 FLOPs, estimated; the head's
        // 4x32 linear layer on 4 rows exactly: 2 x 4 x 4 x 32
        assertTrue(out.contains("01OpaqueGatedUnit (OpaqueGatedUnit, about 8.19 kFLOP)"), out);
        assertTrue(out.contains("opaque composite"), out);
        assertTrue(
                out.contains(
                        "class:io.github.djlamp.amp.it.CustomBlockScenario$OpaqueGatedUnit=trusted"),
                out);
        assertTrue(
                out.contains(
                        "steps without loss scaling; 11.1% of 9.22 kFLOP a forward in bfloat16"),
                "the epoch line says how little ran in bf16:\n" + out);
    }

    @Test
    void aCustomBlockDeclaredLowPrecisionSafeComputesInBf16WithoutAWarning() throws Exception {
        assertComputesAllInBf16("marked");
    }

    @Test
    void aClassTheUserCannotChangeIsVouchedForInOneLine() throws Exception {
        assertComputesAllInBf16("trusted");
    }

    /** The unit's variant computes all its arithmetic in bf16, with no fallback WARN. */
    private static void assertComputesAllInBf16(String variant) throws Exception {
        String out =
                ForkedJvm.runOk(
                        java.util.List.of("-Xmx1g"),
                        CustomBlockScenario.class,
                        variant,
                        "mixed_bfloat16");
        System.out.println(out);
        assertNotEquals(value(out, "plain"), value(out, "amp"), "computed in bf16");
        assertEquals("1.0", value(out, "lowShare"));
        assertFalse(out.contains("little of this model"), out);
        assertTrue(
                value(out, "arithmetic").startsWith("100.0% of 8.19 kFLOP a forward in bfloat16"),
                "all its arithmetic in 16 bits: two 32x16 weights on 4 rows, estimated:\n" + out);
    }
}
