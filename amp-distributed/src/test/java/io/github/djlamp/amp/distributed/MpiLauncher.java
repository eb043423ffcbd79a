package io.github.djlamp.amp.distributed;

import io.github.djlamp.amp.FusedOptimizer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs {@link TrainingJob} under {@code mpirun} on this machine (loopback, oversubscribed). */
final class MpiLauncher {

    /** What an mpirun run ended with. */
    static final class Outcome {
        final int exitCode;
        final String output;
        final long seconds;

        Outcome(int exitCode, String output, long seconds) {
            this.exitCode = exitCode;
            this.output = output;
            this.seconds = seconds;
        }
    }

    private MpiLauncher() {}

    static Outcome run(int ranks, long limitSeconds, List<String> jvmOptions, String... args)
            throws IOException, InterruptedException {
        return run(TrainingJob.class, ranks, limitSeconds, jvmOptions, args);
    }

    static Outcome run(
            Class<?> program, int ranks, long limitSeconds, List<String> jvmOptions, String... args)
            throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add("mpirun");
        command.add("-np");
        command.add(Integer.toString(ranks));
        command.add("--oversubscribe");
        command.add("--bind-to");
        command.add("none");
        // containers often forbid the cross-memory attach vader uses for large messages
        command.add("--mca");
        command.add("btl_vader_single_copy_mechanism");
        command.add("none");
        command.add("-x");
        command.add("OMP_NUM_THREADS=1");
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx400m");
        command.add("-XX:+UseSerialGC");
        command.add("-XX:TieredStopAtLevel=1");
        command.add("-Dai.djl.offline=true");
        command.add("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn");
        // FusedOptimizer.AUTO fuses on a rank's one CPU device: the jobs run DJL's own update
        // unless a test asks for fused steps (a later -D of the same name wins)
        command.add("-D" + FusedOptimizer.PROPERTY + "=off");
        command.addAll(jvmOptions);
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(program.getName());
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        // Open MPI refuses root unless told; CI containers run as root
        builder.environment().put("OMPI_ALLOW_RUN_AS_ROOT", "1");
        builder.environment().put("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        Path log = Files.createTempFile("mpirun-", ".log");
        builder.redirectOutput(log.toFile());
        long start = System.nanoTime();
        Process process = builder.start();
        boolean finished = process.waitFor(limitSeconds, TimeUnit.SECONDS);
        if (!finished) {
            process.descendants().forEach(ProcessHandle::destroyForcibly);
            process.destroyForcibly().waitFor();
        }
        long seconds = (System.nanoTime() - start) / 1_000_000_000L;
        String output = Files.readString(log, StandardCharsets.UTF_8);
        Files.deleteIfExists(log);
        return new Outcome(finished ? process.exitValue() : -1, output, seconds);
    }
}
