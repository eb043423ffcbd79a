package io.github.djlamp.amp.reliability;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs a main class in a fresh JVM with this test's classpath; a native crash fails the test. */
final class ChildJvm {

    private ChildJvm() {}

    /** Runs {@code mainClass} and returns its output; fails unless it exits 0. */
    static String run(Class<?> mainClass, String... args) throws IOException, InterruptedException {
        return run(List.of("-Xmx1g"), mainClass, args);
    }

    /** Runs {@code mainClass} with JVM options; fails unless it exits 0. */
    static String run(List<String> jvmOptions, Class<?> mainClass, String... args)
            throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(jvmOptions);
        command.add("-Dai.djl.offline=true");
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(mainClass.getName());
        command.addAll(List.of(args));
        File log = File.createTempFile("child-jvm", ".log");
        try {
            Process process =
                    new ProcessBuilder(command)
                            .redirectErrorStream(true)
                            .redirectOutput(log)
                            .start();
            if (!process.waitFor(10, TimeUnit.MINUTES)) {
                process.destroyForcibly();
                throw new AssertionError(mainClass.getSimpleName() + " timed out");
            }
            String output = Files.readString(log.toPath(), StandardCharsets.UTF_8);
            if (process.exitValue() != 0) {
                throw new AssertionError(
                        mainClass.getSimpleName()
                                + " exited with "
                                + process.exitValue()
                                + ":\n"
                                + output);
            }
            return output;
        } finally {
            Files.deleteIfExists(log.toPath());
        }
    }
}
