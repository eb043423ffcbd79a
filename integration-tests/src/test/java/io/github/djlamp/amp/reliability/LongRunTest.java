package io.github.djlamp.amp.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.djlamp.amp.it.ForkedJvm;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * 5,000 steps: the live native arrays and the process RSS stay flat after warm-up (within 5%).
 * Long: runs with {@code mvn verify -Plong} (see README), not in the default build. Each run is a
 * child JVM with a fixed, pre-touched heap, so that RSS follows native memory rather than the Java
 * heap being committed.
 */
@Tag("long")
class LongRunTest {

    private static final int STEPS = 5000;
    private static final int WARM_UP = 1000;

    @ParameterizedTest
    @ValueSource(strings = {"mixed_bfloat16", "mixed_float16"})
    void memoryStaysFlat(String policy) throws Exception {
        String output =
                ForkedJvm.runOk(
                        List.of("-Xms384m", "-Xmx384m", "-XX:+AlwaysPreTouch"),
                        LongRunScenario.class,
                        policy,
                        String.valueOf(STEPS));
        System.out.print(output);
        long[] arrays = LongRunScenario.series(output, "arrays");
        long[] rss = LongRunScenario.series(output, "rssKb");
        int warm = WARM_UP / LongRunScenario.EVERY - 1;
        int last = arrays.length - 1;
        assertEquals(STEPS / LongRunScenario.EVERY, arrays.length, output);
        assertEquals(arrays[warm], arrays[last], "live native arrays after warm-up and at the end");
        assertTrue(
                rss[last] <= rss[warm] * 1.05,
                "RSS " + rss[warm] + " KB after warm-up, " + rss[last] + " KB at the end");
    }
}
