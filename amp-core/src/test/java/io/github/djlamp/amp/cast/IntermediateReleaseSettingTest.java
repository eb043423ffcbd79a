package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.Amp;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@code -Ddjlamp.amp.releaseIntermediates} is read when a block is wrapped: unset or true drops
 * the handles, false keeps them, anything else is refused at {@code Amp.wrap}, naming the fix.
 */
class IntermediateReleaseSettingTest {

    private String before;

    @BeforeEach
    void clearProperty() {
        before = System.getProperty(IntermediateRelease.PROPERTY);
        System.clearProperty(IntermediateRelease.PROPERTY);
    }

    @AfterEach
    void restoreProperty() {
        if (before == null) {
            System.clearProperty(IntermediateRelease.PROPERTY);
        } else {
            System.setProperty(IntermediateRelease.PROPERTY, before);
        }
    }

    @Test
    void unsetOrTrueReleasesAndFalseKeeps() {
        assertSame(IntermediateRelease.ON, IntermediateRelease.fromSystemProperty());
        System.setProperty(IntermediateRelease.PROPERTY, " TRUE ");
        assertSame(IntermediateRelease.ON, IntermediateRelease.fromSystemProperty());
        System.setProperty(IntermediateRelease.PROPERTY, "false");
        assertSame(IntermediateRelease.OFF, IntermediateRelease.fromSystemProperty());
        assertTrue(IntermediateRelease.ON.isEnabled());
    }

    @Test
    void anotherValueIsRefusedWhenTheBlockIsWrapped() {
        System.setProperty(IntermediateRelease.PROPERTY, "no");
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> Amp.wrap(Linear.builder().setUnits(2).build(), "mixed_bfloat16"));
        assertTrue(
                e.getMessage().contains("-Ddjlamp.amp.releaseIntermediates=no is not a setting"),
                e.getMessage());
        assertTrue(e.getMessage().contains("use true"), e.getMessage());
        assertTrue(e.getMessage().contains("or false"), e.getMessage());
    }
}
