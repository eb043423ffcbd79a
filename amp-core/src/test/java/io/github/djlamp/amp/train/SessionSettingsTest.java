package io.github.djlamp.amp.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.scale.LossScaling;
import org.junit.jupiter.api.Test;

/** What a session is given of the options: checked when made, defaults by precision. */
class SessionSettingsTest {

    private static final Device[] CPU = {Device.cpu()};

    @Test
    void settingsBelowOneAreRefusedNamingTheOptionToSet() {
        IllegalArgumentException accumulation =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> new SessionSettings(null, 0, 1, devices -> false));
        assertTrue(
                accumulation.getMessage().contains("AmpOptions.builder().accumulationSteps"),
                accumulation.getMessage());
        IllegalArgumentException interval =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> new SessionSettings(null, 1, 0, devices -> false));
        assertTrue(
                interval.getMessage().contains("AmpOptions.builder().hostSyncInterval"),
                interval.getMessage());
        assertThrows(NullPointerException.class, () -> new SessionSettings(null, 1, 1, null));
    }

    @Test
    void withoutLossScalingThePrecisionDecides() {
        SessionSettings settings = new SessionSettings(null, 2, 7, devices -> devices.length == 1);
        assertEquals(LossScaling.dynamic(), settings.lossScalingFor(Precision.FP16));
        assertEquals(LossScaling.none(), settings.lossScalingFor(Precision.BF16));
        assertEquals(LossScaling.none(), settings.lossScalingFor(Precision.FP32));
        assertEquals(2, settings.getAccumulationSteps());
        assertEquals(7, settings.getHostSyncInterval());
        assertTrue(settings.wantsFusedSteps(CPU));
        assertFalse(settings.wantsFusedSteps(new Device[] {Device.cpu(), Device.gpu(0)}));
    }

    @Test
    void aTrainerThatReadsEveryStepGetsAnIntervalOfOne() {
        SessionSettings settings =
                new SessionSettings(
                        null, 1, 100, devices -> !devices[0].isGpu(), d -> true, d -> true);
        assertEquals(100, settings.getHostSyncInterval());
        assertEquals(1, settings.getHostSyncInterval(CPU));
        assertEquals(100, settings.getHostSyncInterval(new Device[] {Device.gpu(0)}));
        assertEquals(
                100,
                new SessionSettings(null, 1, 100, d -> true).getHostSyncInterval(CPU),
                "without a say, the interval holds everywhere");
        assertThrows(
                NullPointerException.class,
                () -> new SessionSettings(null, 1, 1, null, d -> true, d -> true));
    }

    @Test
    void aGivenLossScalingHoldsForEveryPrecision() {
        LossScaling fixed = LossScaling.fixed(128);
        SessionSettings settings = new SessionSettings(fixed, 1, 1, devices -> false);
        assertSame(fixed, settings.lossScalingFor(Precision.BF16));
        assertSame(fixed, settings.lossScalingFor(Precision.FP16));
    }
}
