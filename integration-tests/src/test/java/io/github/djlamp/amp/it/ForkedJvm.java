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
final class ForkedJvm {

    /** What the child did. */
    static final class Result {
        final int exitCode;
        final String output;

        Result(int exitCode, String output) {
            this.exitCode = exitCode;
            this.output = output;
        }

        /** The last non-blank line of the output. */
        String lastLine() {
            String[] lines = output.strip().split("\\R");
            return lines.length == 0 ? "" : lines[lines.length - 1].strip();
        }
    }

    private ForkedJvm() {}

    static Result run(Class<?> mainClass, String... args) throws IOException, InterruptedException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> command = new ArrayList<>();
        command.add(java);
        command.add("-Xmx1g");
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
            if (!process.waitFor(5, TimeUnit.MINUTES)) {
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
