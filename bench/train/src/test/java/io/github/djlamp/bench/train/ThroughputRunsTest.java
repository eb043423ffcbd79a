package io.github.djlamp.bench.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.gson.JsonParser;
import java.util.List;
import org.junit.jupiter.api.Test;

class ThroughputRunsTest {

    private static com.google.gson.JsonObject run(String framework, int batch, String variants) {
        return JsonParser.parseString(
                        "{\"framework\":\""
                                + framework
                                + "\",\"batch\":"
                                + batch
                                + ",\"variants\":["
                                + variants
                                + "]}")
                .getAsJsonObject();
    }

    @Test
    void poolsRoundsPerVariantAndRatiosComeFromMedians() {
        ThroughputRuns runs = new ThroughputRuns(64);
        runs.add(
                1,
                run(
                        "DJL",
                        64,
                        "{\"key\":\"a\",\"label\":\"A\",\"stepMs\":[100,110,120]},"
                                + "{\"key\":\"b\",\"label\":\"B\",\"stepMs\":[40,50,60]}"));
        runs.add(1, run("PyTorch", 64, "{\"key\":\"c\",\"label\":\"C\",\"stepMs\":[80,80,80]}"));
        runs.add(
                2,
                run(
                        "DJL",
                        64,
                        "{\"key\":\"a\",\"label\":\"A\",\"stepMs\":[200,200,200]},"
                                + "{\"key\":\"b\",\"label\":\"B\",\"stepMs\":[50,50,50]}"));
        assertEquals(List.of("a", "b", "c"), runs.keys());
        assertEquals("PyTorch", runs.framework("c"));
        // a pooled: 100 110 120 200 200 200 -> median 160; b: 40 50 50 50 50 60 -> 50
        assertEquals(160, runs.stepMs("a").median(), 1e-9);
        assertEquals(3.2, runs.speedup("b", "a"), 1e-9);
        assertEquals(64 * 1000.0 / 50, runs.imagesPerSecond("b"), 1e-9);
        // per round: 110/50 and 200/50
        assertEquals(List.of(2.2, 4.0), runs.speedupPerRound("b", "a"));
        // c ran in round 1 only
        assertEquals(List.of(1.6), runs.speedupPerRound("b", "c"));
    }

    @Test
    void refusesToPoolDifferentBatchSizes() {
        ThroughputRuns runs = new ThroughputRuns(64);
        assertThrows(
                IllegalArgumentException.class,
                () ->
                        runs.add(
                                1,
                                run("DJL", 128, "{\"key\":\"a\",\"label\":\"A\",\"stepMs\":[1]}")));
        assertThrows(IllegalArgumentException.class, () -> runs.stepMs("missing"));
    }
}
