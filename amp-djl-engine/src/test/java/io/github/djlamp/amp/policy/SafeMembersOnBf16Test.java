package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.djlamp.amp.bytecode.SafeLambdaBodies;
import io.github.djlamp.amp.pytorch.ForkedJvm;
import java.util.TreeSet;
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
        ForkedJvm.Result result = ForkedJvm.run(SafeMembersOnBf16Scenarios.class);
        assertEquals(0, result.exitCode, result.output);
        assertTrue(result.output.contains("ALL MEMBERS RAN"), result.output);
        for (String member : SafeLambdaBodies.DJL_MEMBERS) {
            assertTrue(
                    result.output.contains("ran " + member + "\n"), member + "\n" + result.output);
        }
    }
}
