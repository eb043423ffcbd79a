package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * BUG (open, djl-amp policy validation): a policy that puts a block calling softmax into LOW under
 * bf16 is accepted, and the first training forward kills the JVM natively ("terminate called
 * without an active exception", exit 134) instead of failing with a Java exception.
 *
 * <p>{@code mixed_bfloat16[class:ai.djl.nn.transformer.TransformerEncoderBlock=low]} passes {@code
 * Amp.wrap}; the block's {@code ScaledDotProductAttentionBlock} then calls DJL's softmax on a bf16
 * array, which DJL 0.35.1's PyTorch JNI cannot represent (the trap djl-amp's own guards exist for).
 * {@code DefaultCastRules} knows these blocks call softmax (that is why they default to FP32), but
 * an override bypasses that knowledge without a word. Under fp16 the same override works (see
 * {@link ModelZooNoCrashTest}). This test fails until djl-amp rejects (or at least refuses to run)
 * LOW for blocks known to call softmax when the compute precision is bf16.
 */
class Bf16LowOverrideOfAttentionKillsJvmBugTest {

    @Test
    void lowOverrideOfAnAttentionBlockUnderBf16FailsInJavaNotNatively() throws Exception {
        ForkedJvm.Result result =
                ForkedJvm.run(
                        ZooScenarios.class,
                        "transformer",
                        "mixed_bfloat16[class:ai.djl.nn.transformer.TransformerEncoderBlock=low]",
                        "1");
        System.out.println(result.output.strip());
        boolean ranOrThrewInJava =
                (result.exitCode == 0 && "OK".equals(result.lastLine()))
                        || result.output.contains("Exception in thread \"main\"");
        assertTrue(
                ranOrThrewInJava,
                "the child JVM died natively (exit code "
                        + result.exitCode
                        + ") instead of training or throwing a Java exception:\n"
                        + result.output);
    }
}
