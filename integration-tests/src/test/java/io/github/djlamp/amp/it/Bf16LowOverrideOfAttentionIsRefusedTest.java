package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * A policy that would hand bf16 arrays to a block calling softmax is refused with a Java exception
 * that says why, instead of killing the JVM at the first forward.
 *
 * <p>Regression test: before main's c4c9b0e, {@code
 * mixed_bfloat16[class:ai.djl.nn.transformer.TransformerEncoderBlock=low]} passed {@code Amp.wrap}
 * and the block's attention then called DJL's softmax on a bf16 array: "terminate called without an
 * active exception", exit code 134. Run in a child JVM so that a regression fails this test, not
 * the build. (Under fp16 the same override is allowed and trains: see {@link ModelZooNoCrashTest}.)
 */
class Bf16LowOverrideOfAttentionIsRefusedTest {

    @Test
    void lowOverrideOfAnAttentionBlockUnderBf16IsRefusedInJava() throws Exception {
        ForkedJvm.Result result =
                ForkedJvm.run(
                        ZooScenarios.class,
                        "transformer",
                        "mixed_bfloat16[class:ai.djl.nn.transformer.TransformerEncoderBlock=low]",
                        "1");
        System.out.println(result.output.strip());
        assertEquals(
                1,
                result.exitCode,
                "the child must end with a Java exception (exit code 1), not natively (134):\n"
                        + result.output);
        assertTrue(
                result.output.contains(
                        "Exception in thread \"main\" io.github.djlamp.amp.exception.AmpException"),
                "refused by djl-amp:\n" + result.output);
        assertTrue(result.output.contains("softmax"), "the message says why:\n" + result.output);
        assertFalse(result.output.contains("steps,"), "refused before any training step");
    }
}
