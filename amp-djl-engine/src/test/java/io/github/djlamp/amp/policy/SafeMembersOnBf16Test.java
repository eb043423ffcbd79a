package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The DJL members a user's lambda may call and still run on bf16 arrays ({@link
 * SafeLambdaBodies#DJL_MEMBERS}) each run on bf16 arrays in a child JVM, forward and backward: one
 * that passed a bf16 array's data type to native code would end that JVM, not this one. An entry
 * added to the list without a scenario fails here.
 */
class SafeMembersOnBf16Test {

    @Test
    void everyListedMemberRunsOnBf16ArraysForwardAndBackward() throws Exception {
        assertEquals(
                new TreeSet<>(SafeLambdaBodies.DJL_MEMBERS),
                new TreeSet<>(SafeMembersOnBf16Scenarios.scenarios().keySet()),
                "each listed member has a scenario, and each scenario a member");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> command = new ArrayList<>();
        command.add(java);
        command.add("-Xmx1g");
        command.add("-Dai.djl.offline=true");
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(SafeMembersOnBf16Scenarios.class.getName());
        File log = File.createTempFile("safe-members", ".log");
        try {
            Process process =
                    new ProcessBuilder(command)
                            .redirectErrorStream(true)
                            .redirectOutput(log)
                            .start();
            assertTrue(process.waitFor(5, TimeUnit.MINUTES), "the child JVM timed out");
            String output = Files.readString(log.toPath(), StandardCharsets.UTF_8);
            assertEquals(0, process.exitValue(), output);
            assertTrue(output.contains("ALL MEMBERS RAN"), output);
            for (String member : SafeLambdaBodies.DJL_MEMBERS) {
                assertTrue(output.contains("ran " + member + "\n"), member + "\n" + output);
            }
        } finally {
            Files.deleteIfExists(log.toPath());
        }
    }
}
