package io.github.djlamp.amp.modulepath;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.djlamp.amp.pytorch.ForkedJvm;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.List;

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
        ForkedJvm.Result result = ForkedJvm.run(command);
        assertEquals(0, result.exitCode, result.output);
        return result.output;
    }
}
