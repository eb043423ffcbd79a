package io.github.djlamp.amp.pytorch;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs a main class in a child JVM with this test's classpath, so a native crash fails a test. */
public final class ForkedJvm {

    /** What the child did. */
    public static final class Result {
        /** The child's exit code. */
        public final int exitCode;

        /** What it printed, both streams. */
        public final String output;

        Result(int exitCode, String output) {
            this.exitCode = exitCode;
            this.output = output;
        }
    }

    private ForkedJvm() {}

    /**
     * Runs {@code mainClass} in a child JVM.
     *
     * @param mainClass the program
     * @param args its arguments
     * @return what it did
     * @throws IOException if the child cannot be started or its output read
     * @throws InterruptedException if interrupted while waiting
     */
    public static Result run(Class<?> mainClass, String... args)
            throws IOException, InterruptedException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> command = new ArrayList<>();
        command.add(java);
        command.add("-Xmx1g");
        command.add("-Dai.djl.offline=true");
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(mainClass.getName());
        command.addAll(List.of(args));
        return run(command);
    }

    /**
     * A JVM's command line with this JVM's {@code djlamp.verdicts} (off in the build's tests),
     * unless it sets its own: a test's child keeps no verdict in the user's cache.
     */
    private static List<String> keepingVerdictsAsThisJvm(List<String> command) {
        String verdicts = System.getProperty("djlamp.verdicts");
        boolean java = !command.isEmpty() && command.get(0).endsWith("java");
        if (verdicts == null
                || !java
                || command.stream().anyMatch(a -> a.startsWith("-Ddjlamp.verdicts="))) {
            return command;
        }
        List<String> withVerdicts = new ArrayList<>(command);
        withVerdicts.add(1, "-Ddjlamp.verdicts=" + verdicts);
        return withVerdicts;
    }

    /**
     * Runs a command line, a JVM's, and waits up to five minutes for it.
     *
     * @param command the program and its arguments
     * @return what it did
     * @throws IOException if it cannot be started or its output read
     * @throws InterruptedException if interrupted while waiting
     */
    public static Result run(List<String> command) throws IOException, InterruptedException {
        command = keepingVerdictsAsThisJvm(command);
        File log = File.createTempFile("forked-jvm", ".log");
        try {
            Process process =
                    new ProcessBuilder(command)
                            .redirectErrorStream(true)
                            .redirectOutput(log)
                            .start();
            if (!process.waitFor(5, TimeUnit.MINUTES)) {
                process.destroyForcibly();
                throw new AssertionError("forked JVM timed out: " + String.join(" ", command));
            }
            String output = Files.readString(log.toPath(), StandardCharsets.UTF_8);
            return new Result(process.exitValue(), output);
        } finally {
            Files.deleteIfExists(log.toPath());
        }
    }
}
