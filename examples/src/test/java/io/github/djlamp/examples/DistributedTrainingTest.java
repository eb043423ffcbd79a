package io.github.djlamp.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Runs {@link DistributedTraining} as its documentation says, under {@code mpirun} with two ranks
 * (amp-distributed's build makes sure Open MPI is installed), on a few hundred images.
 */
class DistributedTrainingTest {

    @Test
    void twoRanksTrainAndOnlyRankZeroReports() throws Exception {
        Path log = Files.createTempFile("distributed-training-", ".log");
        ProcessBuilder builder =
                new ProcessBuilder(
                                List.of(
                                        "mpirun",
                                        "-np",
                                        "2",
                                        "--oversubscribe",
                                        "--bind-to",
                                        "none",
                                        "--mca",
                                        "btl_vader_single_copy_mechanism",
                                        "none",
                                        "-x",
                                        "OMP_NUM_THREADS=1",
                                        Path.of(System.getProperty("java.home"), "bin", "java")
                                                .toString(),
                                        "-Xmx600m",
                                        "-Dai.djl.offline=true",
                                        "-cp",
                                        System.getProperty("java.class.path"),
                                        DistributedTraining.class.getName(),
                                        "256"))
                        .redirectErrorStream(true)
                        .redirectOutput(log.toFile());
        builder.environment().put("OMPI_ALLOW_RUN_AS_ROOT", "1");
        builder.environment().put("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        Process process = builder.start();
        boolean finished = process.waitFor(240, TimeUnit.SECONDS);
        if (!finished) {
            process.descendants().forEach(ProcessHandle::destroyForcibly);
            process.destroyForcibly().waitFor();
        }
        String output = Files.readString(log, StandardCharsets.UTF_8);
        Files.deleteIfExists(log);
        System.out.println(output);
        assertTrue(finished, "mpirun ran past 240 s");
        assertEquals(0, process.exitValue(), output);
        assertEquals(
                1,
                output.split("Test accuracy: ", -1).length - 1,
                "rank 0 alone reports: " + output);
        assertTrue(output.contains("(2 ranks, global batch 64)"), output);
    }
}
