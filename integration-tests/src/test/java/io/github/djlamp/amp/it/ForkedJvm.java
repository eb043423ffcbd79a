package io.github.djlamp.amp.it;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Runs a main class in a child JVM with this test's class path, so a native crash (DJL's PyTorch
 * engine terminates the JVM on some bf16 paths) fails one test instead of the whole build.
 */
public final class ForkedJvm {

    /** What the child did. */
    public static final class Result {
        /** The child's exit code. */
        public final int exitCode;

        /** Everything the child printed, stdout and stderr. */
        public final String output;

        Result(int exitCode, String output) {
            this.exitCode = exitCode;
            this.output = output;
        }

        /**
         * Returns the last non-blank line of the output.
         *
         * @return the line
         */
        public String lastLine() {
            String[] lines = output.strip().split("\\R");
            return lines.length == 0 ? "" : lines[lines.length - 1].strip();
        }
    }

    private ForkedJvm() {}

    /**
     * Runs {@code mainClass} with a 1 GiB heap.
     *
     * @param mainClass the class whose main runs
     * @param args its arguments
     * @return what the child did
     * @throws IOException if the child cannot be started or its output read
     * @throws InterruptedException if interrupted while waiting
     */
    public static Result run(Class<?> mainClass, String... args)
            throws IOException, InterruptedException {
        return run(List.of("-Xmx1g"), mainClass, args);
    }

    /**
     * Runs {@code mainClass} and fails unless it exits 0.
     *
     * @param jvmOptions options for the child JVM, e.g. its heap
     * @param mainClass the class whose main runs
     * @param args its arguments
     * @return everything the child printed
     * @throws IOException if the child cannot be started or its output read
     * @throws InterruptedException if interrupted while waiting
     */
    public static String runOk(List<String> jvmOptions, Class<?> mainClass, String... args)
            throws IOException, InterruptedException {
        Result result = run(jvmOptions, mainClass, args);
        if (result.exitCode != 0) {
            throw new AssertionError(
                    mainClass.getSimpleName()
                            + " exited with "
                            + result.exitCode
                            + ":\n"
                            + result.output);
        }
        return result.output;
    }

    /**
     * Runs {@code mainClass} in a child JVM with this test's class path.
     *
     * @param jvmOptions options for the child JVM, e.g. its heap
     * @param mainClass the class whose main runs
     * @param args its arguments
     * @return what the child did
     * @throws IOException if the child cannot be started or its output read
     * @throws InterruptedException if interrupted while waiting
     */
    public static Result run(List<String> jvmOptions, Class<?> mainClass, String... args)
            throws IOException, InterruptedException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> command = new ArrayList<>();
        command.add(java);
        command.addAll(jvmOptions);
        command.add("-Dai.djl.offline=true");
        command.add("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn");
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(mainClass.getName());
        command.addAll(List.of(args));
        File log = File.createTempFile("forked-jvm", ".log");
        try {
            Process process =
                    new ProcessBuilder(command)
                            .redirectErrorStream(true)
                            .redirectOutput(log)
                            .start();
            if (!process.waitFor(10, TimeUnit.MINUTES)) {
                process.destroyForcibly();
                throw new AssertionError(
                        "forked JVM timed out: " + mainClass.getName() + " " + List.of(args));
            }
            String output = Files.readString(log.toPath(), StandardCharsets.UTF_8);
            return new Result(process.exitValue(), output);
        } finally {
            Files.deleteIfExists(log.toPath());
        }
    }
}
