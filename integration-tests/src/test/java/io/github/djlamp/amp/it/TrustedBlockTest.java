package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A block that computes in bf16 on someone's word ({@code LowPrecisionSafe}, {@code
 * class:X=trusted}) and breaks it ends the JVM inside DJL's PyTorch engine, where djl-amp cannot
 * step in: before its first bf16 forward djl-amp logs one line naming the block, its class, who
 * vouched for it and the fix, so that this line is the last djl-amp leaves. Each case runs {@link
 * TrustedBlockScenario} in a child JVM with djl-amp's INFO lines on.
 */
class TrustedBlockTest {

    private static final String BREADCRUMB = "djl-amp: first bfloat16 forward";
    private static final String PREFIX = TrustedBlockScenario.class.getName() + "$";

    private static ForkedJvm.Result run(String variant, String policy) throws Exception {
        ForkedJvm.Result result =
                ForkedJvm.run(
                        List.of("-Xmx1g", "-Dorg.slf4j.simpleLogger.log.io.github.djlamp=info"),
                        TrustedBlockScenario.class,
                        variant,
                        policy,
                        "4");
        System.out.println(result.output.strip());
        return result;
    }

    private static void requireTrainedAndInferred(ForkedJvm.Result result) {
        assertEquals(0, result.exitCode, result.output);
        assertEquals("OK", result.lastLine(), result.output);
        assertTrue(result.output.contains("step 3"), result.output);
        assertTrue(result.output.contains("inference (4, 3)"), result.output);
    }

    private static long breadcrumbs(String output) {
        return output.lines().filter(line -> line.contains(BREADCRUMB)).count();
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"softmax, SoftmaxUnit", "ones, OnesUnit"})
    void aBrokenPromiseEndsTheJvmRightAfterTheLineNamingTheBlock(String variant, String unit)
            throws Exception {
        ForkedJvm.Result result = run(variant, "mixed_bfloat16");
        assertNotEquals(0, result.exitCode, "DJL's engine ends the JVM:\n" + result.output);
        assertTrue(
                result.output.contains("terminate called without an active exception"),
                result.output);
        assertFalse(result.output.contains("step 0"), "it dies in the first forward");
        String[] djlAmpLines =
                Arrays.stream(result.output.split("\\R"))
                        .filter(line -> line.contains("djl-amp: "))
                        .toArray(String[]::new);
        String last = djlAmpLines[djlAmpLines.length - 1];
        // the child computes on DJL's default device, as this JVM does: gpu(0) on a GPU machine
        String device = Engine.getEngine("PyTorch").defaultDevice().toString();
        assertTrue(last.contains(BREADCRUMB + " on " + device + " of '02" + unit + "'"), last);
        assertTrue(last.contains("(" + PREFIX + unit + ")"), last);
        assertTrue(last.contains("on the word of its author (LowPrecisionSafe)"), last);
        assertTrue(last.contains("\"terminate called without an active exception\""), last);
        assertTrue(last.contains("class:" + PREFIX + unit + "=fp32"), last);
        assertEquals(1, breadcrumbs(result.output), result.output);
    }

    @ParameterizedTest
    @CsvSource({
        "marked, MarkedGatedUnit, its author (LowPrecisionSafe)",
        "trusted, GatedUnit, the policy (class:",
        "cast-softmax, CastSoftmaxUnit, its author (LowPrecisionSafe)"
    })
    void aBlockKeepingThePromiseLogsTheLineOnceOverSeveralSteps(
            String variant, String unit, String voucher) throws Exception {
        ForkedJvm.Result result = run(variant, "mixed_bfloat16");
        requireTrainedAndInferred(result);
        assertEquals(1, breadcrumbs(result.output), "4 steps and an inference:\n" + result.output);
        String line =
                result.output.lines().filter(l -> l.contains(BREADCRUMB)).findFirst().orElseThrow();
        assertTrue(line.contains("'02" + unit + "' (" + PREFIX + unit + ")"), line);
        assertTrue(line.contains("on the word of " + voucher), line);
    }

    @Test
    void djlBlocksTheRulesKnowLogNothing() throws Exception {
        ForkedJvm.Result result = run("known", "mixed_bfloat16");
        requireTrainedAndInferred(result);
        assertEquals(0, breadcrumbs(result.output), "Conv2d, BatchNorm, relu, Linear");
    }

    @Test
    void theBrokenBlockKeptInFp32AsTheLineSaysTrains() throws Exception {
        ForkedJvm.Result result = run("softmax-fp32", "mixed_bfloat16");
        requireTrainedAndInferred(result);
        assertEquals(0, breadcrumbs(result.output), result.output);
    }

    /** DJL's PyTorch engine knows FLOAT16: the same broken blocks survive it, with no line. */
    @ParameterizedTest
    @ValueSource(strings = {"softmax", "ones"})
    void underFp16TheBrokenBlocksTrainAndLogNothing(String variant) throws Exception {
        ForkedJvm.Result result = run(variant, "mixed_float16");
        requireTrainedAndInferred(result);
        assertEquals(0, breadcrumbs(result.output), result.output);
    }
}
