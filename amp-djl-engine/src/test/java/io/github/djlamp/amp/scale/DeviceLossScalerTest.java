package io.github.djlamp.amp.scale;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The scaler whose state stays on the device ({@link LossScaler#onDevice}) against the one that
 * reads every step ({@link LossScaler#onHost}): the same states at every read, reads only at the
 * interval, and the same verb-order rules.
 */
class DeviceLossScalerTest {

    private NDManager manager;
    private AmpBackend backend;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager("PyTorch");
        backend = AmpBackends.forManager(manager);
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    private LossScaler onDevice(LossScaling config, int interval) {
        return LossScaler.onDevice(config, backend, manager, Device.cpu(), interval);
    }

    /** One step with the given gradient values; returns what the check returned. */
    private boolean step(LossScaler scaler, float... gradient) {
        try (NDManager step = manager.newSubManager()) {
            GradientSet grads = new GradientSet();
            if (gradient.length > 0) {
                grads.add("w", step.create(gradient));
            }
            boolean skipped = scaler.unscaleAndCheck(grads, step);
            scaler.update();
            return skipped;
        }
    }

    @Test
    void theStateIsTheHostScalersAtEveryRead() {
        LossScaling config =
                LossScaling.dynamicBuilder()
                        .growthInterval(3)
                        .hysteresis(2)
                        .minScale(1e-3f)
                        .build();
        Random random = new Random(5);
        try (LossScaler host = LossScaler.onHost(config, backend, manager, Device.cpu());
                LossScaler device = onDevice(config, 4)) {
            assertTrue(device.isStateOnDevice());
            assertFalse(host.isStateOnDevice());
            for (int i = 1; i <= 200; i++) {
                float value = random.nextInt(4) == 0 ? Float.POSITIVE_INFINITY : 1f;
                step(host, value);
                step(device, value);
                assertEquals(i % 4 == 0, device.isMirrorFresh(), "read at step " + i);
                if (i % 4 == 0) {
                    assertEquals(host.state(), device.state(), "step " + i);
                }
            }
            assertEquals(50, device.getHostReads(), "one read every 4 steps");
            assertEquals(host.getScale(), device.getScaleArray().getFloat());
        }
    }

    @Test
    void aGetterReadsAStaleMirrorOnce() {
        try (LossScaler scaler = onDevice(LossScaling.dynamic(), 100)) {
            assertFalse(step(scaler, Float.NaN), "the verdict stays on the device");
            assertFalse(scaler.isMirrorFresh());
            assertEquals(0, scaler.getHostReads());
            assertEquals(32768f, scaler.getScale());
            assertEquals(1, scaler.getSkippedSteps());
            assertTrue(scaler.isMirrorFresh());
            assertEquals(1, scaler.getHostReads(), "one read for every getter");
        }
    }

    @Test
    void aStepWithNoGradientsLeavesTheScaleAlone() {
        // the last verdict must not be counted again by a step that checked nothing
        try (LossScaler device = onDevice(LossScaling.dynamic(), 1);
                LossScaler host =
                        LossScaler.onHost(LossScaling.dynamic(), backend, manager, Device.cpu())) {
            for (LossScaler scaler : new LossScaler[] {device, host}) {
                assertTrue(step(scaler, Float.NaN));
                assertFalse(step(scaler));
                assertEquals(32768f, scaler.getScale());
                assertEquals(32768f, scaler.getScaleArray().getFloat(), "device scale");
                assertEquals(1, scaler.getSkippedSteps());
            }
        }
    }

    @Test
    void verbsOutOfOrderAreRejected() {
        try (LossScaler scaler = onDevice(LossScaling.dynamic(), 10);
                NDManager step = manager.newSubManager()) {
            assertThrows(IllegalStateException.class, scaler::update);
            assertThrows(IllegalStateException.class, scaler::isStepSkipped);
            GradientSet grads = new GradientSet().add("w", step.create(1f));
            scaler.unscaleAndCheck(grads, step);
            assertThrows(IllegalStateException.class, () -> scaler.unscaleAndCheck(grads, step));
            assertThrows(IllegalStateException.class, () -> scaler.scale(step.create(1f)));
            IllegalStateException restore =
                    assertThrows(IllegalStateException.class, () -> scaler.restore(scaler.state()));
            assertTrue(restore.getMessage().contains("call update() first"), restore.getMessage());
            assertFalse(scaler.isStepSkipped(), "asked for: read now");
            scaler.update();
            scaler.scale(step.create(1f));
        }
    }

    @Test
    void noScalingOrABadIntervalIsNotKeptOnTheDevice() {
        try (LossScaler scaler = onDevice(LossScaling.none(), 10)) {
            assertFalse(scaler.isStateOnDevice(), "nothing to keep");
        }
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class, () -> onDevice(LossScaling.dynamic(), 0));
        assertTrue(e.getMessage().contains("hostSyncInterval"), e.getMessage());
    }

    @Test
    void aRestoredStateCarriesOnOnTheDevice() {
        LossScaling config = LossScaling.dynamicBuilder().growthInterval(3).hysteresis(2).build();
        ScalerState saved;
        try (LossScaler scaler = LossScaler.onHost(config, backend, manager, Device.cpu())) {
            step(scaler, 1f);
            step(scaler, Float.NaN);
            saved = scaler.state();
        }
        try (LossScaler resumed = onDevice(config, 5)) {
            resumed.restore(saved);
            assertEquals(saved, resumed.state());
            step(resumed, Float.NaN);
            assertEquals(32768f, resumed.getScale(), "the restored hysteresis count carries on");
        }
    }
}
