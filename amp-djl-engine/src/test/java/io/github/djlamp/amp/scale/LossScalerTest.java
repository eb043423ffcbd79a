package io.github.djlamp.amp.scale;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Every transition of the loss scaling state machine, on PyTorch's kernels. */
class LossScalerTest {

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

    private LossScaler scaler(LossScaling config) {
        return LossScaler.onHost(config, backend, manager, Device.cpu());
    }

    /** One step with the given gradient values; returns whether it was skipped. */
    private boolean step(LossScaler scaler, float... gradient) {
        try (NDManager step = manager.newSubManager()) {
            GradientSet grads = new GradientSet().add("w", step.create(gradient));
            boolean skipped = scaler.unscaleAndCheck(grads, step);
            assertEquals(skipped, scaler.isStepSkipped());
            scaler.update();
            return skipped;
        }
    }

    private static void assertDeviceMatchesHost(LossScaler scaler) {
        assertEquals(scaler.getScale(), scaler.getScaleArray().getFloat(), "device scale");
    }

    @Test
    void defaultsAreGradScalers() {
        LossScaling d = LossScaling.dynamic();
        assertEquals(65536f, d.getInitScale());
        assertEquals(2.0, d.getGrowthFactor());
        assertEquals(0.5, d.getBackoffFactor());
        assertEquals(2000, d.getGrowthInterval());
        assertEquals(1, d.getHysteresis());
    }

    @Test
    void growsExactlyAtTheIntervalWithDefaults() {
        try (LossScaler scaler = scaler(LossScaling.dynamic())) {
            for (int i = 1; i < 2000; i++) {
                assertFalse(step(scaler, 1f));
            }
            assertEquals(65536f, scaler.getScale());
            assertEquals(1999, scaler.getGrowthTracker());
            step(scaler, 1f);
            assertEquals(131072f, scaler.getScale());
            assertEquals(0, scaler.getGrowthTracker());
            assertDeviceMatchesHost(scaler);
        }
    }

    @Test
    void overflowSkipsHalvesAndResetsTheTracker() {
        LossScaling config = LossScaling.dynamicBuilder().growthInterval(4).build();
        try (LossScaler scaler = scaler(config)) {
            step(scaler, 1f);
            step(scaler, 1f);
            assertEquals(2, scaler.getGrowthTracker());
            assertTrue(step(scaler, 1f, Float.NaN));
            assertEquals(32768f, scaler.getScale());
            assertEquals(0, scaler.getGrowthTracker());
            assertEquals(1, scaler.getSkippedSteps());
            assertEquals(3, scaler.getSteps());
            assertTrue(step(scaler, Float.NEGATIVE_INFINITY));
            assertEquals(16384f, scaler.getScale());
            for (int i = 0; i < 4; i++) {
                step(scaler, 1f);
            }
            assertEquals(32768f, scaler.getScale());
            assertDeviceMatchesHost(scaler);
        }
    }

    @Test
    void gradientsAreUnscaledInPlace() {
        try (LossScaler scaler = scaler(LossScaling.dynamic());
                NDManager step = manager.newSubManager()) {
            NDArray g = step.create(new float[] {65536f, -131072f});
            scaler.unscaleAndCheck(new GradientSet().add("w", g), step);
            assertArrayEquals(new float[] {1f, -2f}, g.toFloatArray());
            scaler.update();
        }
    }

    /** Three replicas stand for three devices: the check covers all and merges their flags. */
    private boolean stepReplicas(LossScaler scaler, int badReplica, float bad) {
        try (NDManager step = manager.newSubManager()) {
            GradientSet grads = new GradientSet();
            NDArray[] arrays = new NDArray[3];
            for (int replica = 0; replica < 3; replica++) {
                float value = replica == badReplica ? bad : 65536f * (replica + 1);
                arrays[replica] = step.create(new float[] {65536f, value});
                grads.add("w", replica, arrays[replica]);
                grads.add("b", replica, step.create(new float[] {131072f}));
            }
            boolean skipped = scaler.unscaleAndCheck(grads, step);
            if (!skipped) {
                for (int replica = 0; replica < 3; replica++) {
                    assertArrayEquals(
                            new float[] {1f, replica + 1f}, arrays[replica].toFloatArray());
                }
            }
            scaler.update();
            return skipped;
        }
    }

    @Test
    void anInfOnAnyReplicaSkipsTheStepForAll() {
        try (LossScaler scaler = scaler(LossScaling.dynamic())) {
            assertFalse(stepReplicas(scaler, -1, 0f), "all replicas finite");
            for (int bad = 0; bad < 3; bad++) {
                assertTrue(stepReplicas(scaler, bad, Float.POSITIVE_INFINITY), "Inf on " + bad);
            }
            assertTrue(stepReplicas(scaler, 2, Float.NaN));
            assertEquals(4, scaler.getSkippedSteps());
            assertEquals(65536f / 16, scaler.getScale());
        }
    }

    @Test
    void hysteresisToleratesOverflowsBeforeBackingOff() {
        LossScaling config = LossScaling.dynamicBuilder().hysteresis(3).growthInterval(100).build();
        try (LossScaler scaler = scaler(config)) {
            assertTrue(step(scaler, Float.POSITIVE_INFINITY));
            assertEquals(65536f, scaler.getScale(), "1st overflow tolerated");
            step(scaler, 1f);
            assertTrue(step(scaler, Float.POSITIVE_INFINITY));
            assertEquals(65536f, scaler.getScale(), "2nd overflow tolerated");
            assertEquals(0, scaler.getGrowthTracker(), "a tolerated overflow resets the tracker");
            assertTrue(step(scaler, Float.POSITIVE_INFINITY));
            assertEquals(32768f, scaler.getScale(), "3rd overflow backs off");
            assertTrue(step(scaler, Float.POSITIVE_INFINITY));
            assertEquals(32768f, scaler.getScale(), "the count restarts after a backoff");
            assertEquals(4, scaler.getSkippedSteps(), "every overflow skips its step");
            assertDeviceMatchesHost(scaler);
        }
    }

    @Test
    void maximumScaleCapsGrowth() {
        LossScaling config =
                LossScaling.dynamicBuilder()
                        .initScale(1024f)
                        .maxScale(3000f)
                        .growthInterval(1)
                        .build();
        try (LossScaler scaler = scaler(config)) {
            step(scaler, 1f);
            assertEquals(2048f, scaler.getScale());
            step(scaler, 1f);
            assertEquals(3000f, scaler.getScale(), "growth stops at the maximum");
            step(scaler, 1f);
            assertEquals(3000f, scaler.getScale());
            assertDeviceMatchesHost(scaler);
        }
    }

    @Test
    void minimumScaleStopsTrainingNamingTheParameters() {
        LossScaling config = LossScaling.dynamicBuilder().initScale(4f).minScale(1f).build();
        try (LossScaler scaler = scaler(config);
                NDManager step = manager.newSubManager()) {
            assertTrue(step(scaler, Float.NaN));
            assertTrue(step(scaler, Float.NaN));
            assertEquals(1f, scaler.getScale(), "the floor itself can be reached");
            GradientSet grads =
                    new GradientSet()
                            .add("01Linear_weight", step.create(new float[] {1f}))
                            .add("02Linear_weight", step.create(new float[] {Float.NaN}))
                            .add(
                                    "03Linear_bias",
                                    step.create(new float[] {Float.POSITIVE_INFINITY}));
            assertTrue(scaler.unscaleAndCheck(grads, step));
            LossScaleCollapsedException e =
                    assertThrows(LossScaleCollapsedException.class, scaler::update);
            assertEquals(List.of("02Linear_weight", "03Linear_bias"), e.getNonFiniteParameters());
            assertFalse(e.isLossNonFinite());
            assertTrue(e.getMessage().contains("02Linear_weight"), e.getMessage());
            assertTrue(e.getMessage().contains("overridePath"), e.getMessage());
        }
    }

    @Test
    void theCollapseNamesParametersEvenAfterTheSkippedStepClearedTheirGradients() {
        LossScaling config = LossScaling.dynamicBuilder().initScale(1f).minScale(1f).build();
        try (LossScaler scaler = scaler(config);
                NDManager step = manager.newSubManager()) {
            NDArray grad = step.create(new float[] {Float.NaN});
            scaler.unscaleAndCheck(new GradientSet().add("01Conv2d_weight", grad), step);
            backend.zero(new ai.djl.ndarray.NDList(grad)); // what the optimizer decorator does
            LossScaleCollapsedException e =
                    assertThrows(LossScaleCollapsedException.class, scaler::update);
            assertEquals(List.of("01Conv2d_weight"), e.getNonFiniteParameters());
        }
    }

    @Test
    void nonFiniteLossIsReportedAsDivergence() {
        LossScaling config = LossScaling.dynamicBuilder().initScale(1f).minScale(1f).build();
        try (LossScaler scaler = scaler(config);
                NDManager step = manager.newSubManager()) {
            scaler.scale(step.create(Float.NaN));
            scaler.unscaleAndCheck(new GradientSet().add("w", step.create(Float.NaN)), step);
            LossScaleCollapsedException e =
                    assertThrows(LossScaleCollapsedException.class, scaler::update);
            assertTrue(e.isLossNonFinite());
            assertTrue(e.getMessage().startsWith("Training diverged"), e.getMessage());
        }
    }

    @Test
    void staticScaleNeverMovesButSkips() {
        try (LossScaler scaler = scaler(LossScaling.fixed(128f))) {
            assertTrue(step(scaler, Float.NaN));
            assertFalse(step(scaler, 256f));
            assertEquals(128f, scaler.getScale());
            assertEquals(1, scaler.getSkippedSteps());
        }
    }

    @Test
    void noScalingPassesTheLossThroughAndNeverSkips() {
        try (LossScaler scaler = scaler(LossScaling.none())) {
            NDArray loss = manager.create(2f);
            assertSame(loss, scaler.scale(loss));
            assertFalse(step(scaler, Float.NaN), "no check without scaling");
            assertEquals(1f, scaler.getScale());
        }
    }

    @Test
    void scaleMultipliesTheLoss() {
        try (LossScaler scaler = scaler(LossScaling.dynamic())) {
            assertEquals(3f * 65536f, scaler.scale(manager.create(3f)).getFloat());
        }
    }

    @Test
    void verbsOutOfOrderAreRejected() {
        try (LossScaler scaler = scaler(LossScaling.dynamic());
                NDManager step = manager.newSubManager()) {
            assertThrows(IllegalStateException.class, scaler::update);
            assertThrows(IllegalStateException.class, scaler::isStepSkipped);
            GradientSet grads = new GradientSet().add("w", step.create(1f));
            scaler.unscaleAndCheck(grads, step);
            IllegalStateException twice =
                    assertThrows(
                            IllegalStateException.class, () -> scaler.unscaleAndCheck(grads, step));
            assertTrue(twice.getMessage().contains("already"), twice.getMessage());
            assertThrows(IllegalStateException.class, () -> scaler.scale(step.create(1f)));
            scaler.update();
            scaler.scale(step.create(1f));
        }
    }

    @Test
    void bfloat16LossIsRefusedBeforeItReachesBackward() {
        try (LossScaler scaler = scaler(LossScaling.dynamic())) {
            NDArray bf16 = backend.cast(manager.create(1f), Precision.BF16, manager);
            AmpException e = assertThrows(AmpException.class, () -> scaler.scale(bf16));
            assertTrue(e.getMessage().contains("backward"), e.getMessage());
        }
    }

    @Test
    void stateRoundTripsThroughRestore() {
        LossScaling config = LossScaling.dynamicBuilder().growthInterval(3).hysteresis(2).build();
        ScalerState saved;
        try (LossScaler scaler = scaler(config)) {
            step(scaler, 1f);
            step(scaler, Float.NaN);
            step(scaler, 1f);
            saved = scaler.state();
            assertEquals(saved, ScalerState.parse(saved.toString()));
        }
        try (LossScaler resumed = scaler(config)) {
            resumed.restore(saved);
            assertEquals(saved, resumed.state());
            assertDeviceMatchesHost(resumed);
            step(resumed, Float.NaN);
            assertEquals(32768f, resumed.getScale(), "the restored hysteresis count carries on");
        }
    }

    @Test
    void randomScriptKeepsDeviceAndHostInStep() {
        LossScaling config =
                LossScaling.dynamicBuilder()
                        .growthInterval(5)
                        .hysteresis(2)
                        .minScale(1e-3f)
                        .build();
        java.util.Random random = new java.util.Random(11);
        try (LossScaler scaler = scaler(config)) {
            for (int i = 0; i < 300; i++) {
                step(scaler, random.nextInt(6) == 0 ? Float.NaN : 1f);
                assertDeviceMatchesHost(scaler);
            }
        }
    }
}
