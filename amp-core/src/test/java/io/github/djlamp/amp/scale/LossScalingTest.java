package io.github.djlamp.amp.scale;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

class LossScalingTest {

    private static void assertRejected(Consumer<LossScaling.Builder> setting, String... words) {
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> {
                            LossScaling.Builder builder = LossScaling.dynamicBuilder();
                            setting.accept(builder);
                            builder.build();
                        });
        for (String word : words) {
            assertTrue(e.getMessage().contains(word), e.getMessage());
        }
    }

    @Test
    void invalidSettingsAreRejectedWithWhatIsAllowed() {
        assertRejected(b -> b.growthFactor(1.0), "growthFactor", "> 1", "2.0");
        assertRejected(b -> b.growthFactor(0.5), "growthFactor");
        assertRejected(b -> b.growthFactor(Double.POSITIVE_INFINITY), "growthFactor");
        assertRejected(b -> b.backoffFactor(0), "backoffFactor", "(0, 1)");
        assertRejected(b -> b.backoffFactor(1), "backoffFactor");
        assertRejected(b -> b.backoffFactor(Double.NaN), "backoffFactor");
        assertRejected(b -> b.growthInterval(0), "growthInterval", ">= 1");
        assertRejected(b -> b.growthInterval(-5), "growthInterval");
        assertRejected(b -> b.initScale(0), "initScale", "[2^-24, 2^40]");
        assertRejected(b -> b.initScale(-1), "initScale");
        assertRejected(b -> b.initScale(Float.NaN), "initScale");
        assertRejected(b -> b.initScale(Float.POSITIVE_INFINITY), "initScale");
        assertRejected(b -> b.hysteresis(0), "hysteresis");
        assertRejected(b -> b.minScale(0), "minScale");
        assertRejected(b -> b.maxScale(Float.NaN), "maxScale");
        assertRejected(b -> b.minScale(100).maxScale(10).initScale(50), "minScale", "maxScale");
        assertRejected(b -> b.maxScale(1000), "initScale", "[minScale, maxScale]");
        assertThrows(IllegalArgumentException.class, () -> LossScaling.fixed(0));
        assertThrows(IllegalArgumentException.class, () -> LossScaling.fixed(Float.NaN));
    }

    @Test
    void scalesOutsideTheUsefulRangeAreRejected() {
        assertRejected(b -> b.initScale(1e30f), "initScale", "[2^-24, 2^40]", "overflows");
        assertRejected(b -> b.minScale(1e-30f), "minScale", "underflows");
        assertRejected(b -> b.maxScale(0x1p41f), "maxScale", "2^40");
        IllegalArgumentException high =
                assertThrows(IllegalArgumentException.class, () -> LossScaling.fixed(1e30f));
        assertTrue(high.getMessage().contains("[2^-24, 2^40]"), high.getMessage());
        assertThrows(IllegalArgumentException.class, () -> LossScaling.fixed(1e-30f));
        assertEquals(0x1p40f, LossScaling.fixed(0x1p40f).getInitScale());
        assertEquals(0x1p-24f, LossScaling.fixed(0x1p-24f).getInitScale());
    }

    @Test
    void modesAndEquality() {
        assertFalse(LossScaling.none().isEnabled());
        assertEquals(LossScaling.Mode.STATIC, LossScaling.fixed(8).getMode());
        assertEquals(8f, LossScaling.fixed(8).getInitScale());
        assertEquals(LossScaling.dynamic(), LossScaling.dynamicBuilder().build());
        assertTrue(LossScaling.dynamic().toString().contains("init=65536.0"));
    }

    @Test
    void scalerStateParsesOnlyItsOwnForm() {
        ScalerState state = new ScalerState(1024f, 7, 1, 40, 3);
        assertEquals(state, ScalerState.parse(state.toString()));
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> ScalerState.parse("scale=x"));
        assertTrue(e.getMessage().contains("expected scale=F"), e.getMessage());
    }
}
