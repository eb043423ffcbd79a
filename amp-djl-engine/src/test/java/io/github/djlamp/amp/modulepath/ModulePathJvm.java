package io.github.djlamp.amp.modulepath;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.File;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** What the module-path tests share: where a class's module lives, and a child JVM's run. */
final class ModulePathJvm {

    private ModulePathJvm() {}

    /** The jar or classes folder that holds {@code type}. */
    static Path location(Class<?> type) throws URISyntaxException {
        return Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI())
                .toAbsolutePath();
    }

    /** Runs {@code command}, asserts it exits 0 within five minutes, and returns its output. */
    static String run(List<String> command) throws Exception {
        File log = File.createTempFile("module-path", ".log");
        try {
            Process process =
                    new ProcessBuilder(command)
                            .redirectErrorStream(true)
                            .redirectOutput(log)
                            .start();
            if (!process.waitFor(5, TimeUnit.MINUTES)) {
                process.destroyForcibly();
                throw new AssertionError("the module-path JVM timed out");
            }
            String output = Files.readString(log.toPath(), StandardCharsets.UTF_8);
            assertEquals(0, process.exitValue(), output);
            return output;
        } finally {
            Files.deleteIfExists(log.toPath());
        }
    }
}
