package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class CastCategoryTest {

    @Test
    void parsesConfigNamesInAnyCase() {
        assertEquals(CastCategory.LOW, CastCategory.parse("low"));
        assertEquals(CastCategory.LOW, CastCategory.parse(" LOW "));
        assertEquals(CastCategory.FP32, CastCategory.parse("fp32"));
        assertEquals(CastCategory.FP32, CastCategory.parse("Fp32"));
        assertEquals(CastCategory.PASS_THROUGH, CastCategory.parse("pass_through"));
        assertEquals(CastCategory.PASS_THROUGH, CastCategory.parse("PASS_THROUGH"));
    }

    @Test
    void configNamesRoundTrip() {
        for (CastCategory category : CastCategory.values()) {
            if (category.isOverridable()) {
                assertEquals(category, CastCategory.parse(category.configName()));
            }
        }
    }

    @Test
    void rejectsUnknownNamesListingValidOnes() {
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> CastCategory.parse("half"));
        assertTrue(e.getMessage().contains("Unknown cast category 'half'"), e.getMessage());
        assertTrue(e.getMessage().contains("low, fp32, pass_through"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> CastCategory.parse(null));
        assertThrows(IllegalArgumentException.class, () -> CastCategory.parse("pass-through"));
    }

    @Test
    void containerCannotBeParsed() {
        assertFalse(CastCategory.CONTAINER.isOverridable());
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> CastCategory.parse("container"));
        assertTrue(e.getMessage().contains("cannot be set"), e.getMessage());
        assertTrue(e.getMessage().contains("low, fp32, pass_through"), e.getMessage());
    }

    @Test
    void inputPrecisions() {
        assertEquals(Precision.BF16, CastCategory.LOW.inputPrecision(Precision.BF16));
        assertEquals(Precision.FP16, CastCategory.LOW.inputPrecision(Precision.FP16));
        assertEquals(Precision.FP32, CastCategory.FP32.inputPrecision(Precision.BF16));
        assertNull(CastCategory.PASS_THROUGH.inputPrecision(Precision.BF16));
        assertNull(CastCategory.CONTAINER.inputPrecision(Precision.BF16));
    }
}
