package io.github.djlamp.bench.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * What bench/gpu reads from {@code TrainBench throughput}: each variant's first step timed apart,
 * and on a machine without a GPU the process's peak resident size (a CPU dry run's stand-in for
 * device memory).
 */
class ThroughputCommandTest {

    @Test
    void writesTheFirstStepApartAndTheHostPeakOnTheCpu(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("t.json");
        int exit =
                new CommandLine(new TrainBench())
                        .execute(
                                "throughput",
                                "--network=resnet18",
                                "--batch=2",
                                "--warmup=1",
                                "--steps=2",
                                "--variants=djl-fp32",
                                "--out=" + out);
        assertEquals(0, exit);
        JsonObject json =
                JsonParser.parseString(Files.readString(out, StandardCharsets.UTF_8))
                        .getAsJsonObject();
        JsonArray variants = json.getAsJsonArray("variants");
        assertEquals(1, variants.size());
        JsonObject v = variants.get(0).getAsJsonObject();
        assertEquals(2, v.getAsJsonArray("stepMs").size());
        assertTrue(v.get("firstStepMs").getAsDouble() > 0, v.toString());
        assertFalse(json.has("deviceMemory"), "no GPU here");
        // the JVM and libtorch alone take more than 100 MiB
        assertTrue(json.get("hostPeakRssKib").getAsLong() > 100 << 10, json.toString());
    }
}
