package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.scale.GradientSet;
import io.github.djlamp.amp.scale.LossScaleCollapsedException;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.scale.ScalerState;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.DeviceScaleState;
import io.github.djlamp.amp.spi.DynamicScaleSettings;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The device-side scale update follows the host scaler step for step: hysteresis, growth capped at
 * the maximum, and a back-off below the minimum reported as a collapse.
 */
class DeviceScaleUpdateTest {

    private NDManager manager;
    private AmpBackend backend;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager(Device.cpu(), "PyTorch");
        backend = AmpBackends.forManager(manager);
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    private DeviceScaleState deviceState(ScalerState start) {
        return new DeviceScaleState(
                start.getScale(),
                start.getGrowthTracker(),
                start.getOverflowsSinceChange(),
                start.getSkippedSteps(),
                manager,
                Device.cpu());
    }

    @Test
    void followsTheHostScalerThroughGrowthCapHysteresisAndCollapse() {
        LossScaling config =
                LossScaling.dynamicBuilder()
                        .initScale(8f)
                        .growthFactor(3)
                        .backoffFactor(0.5)
                        .growthInterval(2)
                        .hysteresis(2)
                        .minScale(0.25f)
                        .maxScale(100f)
                        .build();
        // clean runs grow 8 -> 24 -> 72 -> 100 (capped); overflows then back off every second time
        String pattern = "ccccccccxcxxcxxxxxxxxxxxxxxxxxxxxxxx";
        boolean collapsed = false;
        DynamicScaleSettings settings =
                new DynamicScaleSettings(
                        config.getGrowthFactor(),
                        config.getBackoffFactor(),
                        config.getGrowthInterval(),
                        config.getHysteresis(),
                        config.getMinScale(),
                        config.getMaxScale());
        try (LossScaler host = LossScaler.onHost(config, backend, manager, Device.cpu());
                DeviceScaleState device = deviceState(host.state())) {
            for (int i = 0; i < pattern.length() && !collapsed; i++) {
                boolean overflow = pattern.charAt(i) == 'x';
                try (NDManager step = manager.newSubManager()) {
                    float value = overflow ? Float.POSITIVE_INFINITY : 1f;
                    GradientSet grads =
                            new GradientSet().add("w", step.create(new float[] {value}));
                    host.unscaleAndCheck(grads, step);
                    backend.updateScaleWithHysteresis(device, host.getFoundInfArray(), settings);
                    try {
                        host.update();
                    } catch (LossScaleCollapsedException e) {
                        collapsed = true;
                    }
                }
                ScalerState expected = host.state();
                String at = "step " + i + " (" + pattern.charAt(i) + ")";
                assertEquals(
                        Float.floatToIntBits(expected.getScale()),
                        Float.floatToIntBits(device.getScale().getFloat(0)),
                        at + ": scale " + expected.getScale());
                assertEquals(expected.getGrowthTracker(), device.getGrowthTracker().getInt(0), at);
                assertEquals(
                        expected.getOverflowsSinceChange(),
                        device.getOverflowsSinceChange().getInt(0),
                        at + ": overflows since change");
                assertEquals(expected.getSkippedSteps(), device.getSkippedSteps().getLong(0), at);
                assertEquals(collapsed ? 1f : 0f, device.getCollapsed().getFloat(0), at);
            }
            assertTrue(collapsed, "the pattern reaches the minimum");
            assertEquals(100f, config.getMaxScale());
        }
    }
}
