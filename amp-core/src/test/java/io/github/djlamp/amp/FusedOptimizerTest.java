package io.github.djlamp.amp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import io.github.djlamp.amp.train.LossScalingOptimizer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class FusedOptimizerTest {

    private static final Device[] CPU = {Device.cpu()};
    private static final Device[] ONE_GPU = {Device.gpu(0)};
    private static final Device[] TWO_GPUS = {Device.gpu(0), Device.gpu(1)};
    private static final Device[] CPU_AND_GPU = {Device.cpu(), Device.gpu(0)};

    private String before;

    @BeforeEach
    void clearProperty() {
        before = System.getProperty(FusedOptimizer.PROPERTY);
        System.clearProperty(FusedOptimizer.PROPERTY);
    }

    @AfterEach
    void restoreProperty() {
        if (before == null) {
            System.clearProperty(FusedOptimizer.PROPERTY);
        } else {
            System.setProperty(FusedOptimizer.PROPERTY, before);
        }
    }

    @Test
    void theDefaultFusesOnOneDeviceGpuOrCpu() {
        assertEquals(FusedOptimizer.AUTO, AmpOptions.defaults().getFusedOptimizer());
        assertTrue(FusedOptimizer.AUTO.wantsFusedSteps(ONE_GPU), "one GPU: no host read per step");
        assertTrue(
                FusedOptimizer.AUTO.wantsFusedSteps(CPU),
                "CPU: one launch instead of one update per parameter (bench/RESULTS.md)");
        assertFalse(FusedOptimizer.AUTO.wantsFusedSteps(TWO_GPUS), "fused steps need one device");
        assertFalse(FusedOptimizer.AUTO.wantsFusedSteps(CPU_AND_GPU));
    }

    @Test
    void autoOnTheCpuReadsTheScalerEveryStepUnlessAnIntervalWasSet() {
        AmpOptions defaults = AmpOptions.defaults();
        assertTrue(defaults.readsEveryStepOn(CPU), "a host read costs nothing on the CPU");
        assertFalse(defaults.readsEveryStepOn(ONE_GPU), "a GPU keeps the interval");
        assertEquals(AmpOptions.DEFAULT_HOST_SYNC_INTERVAL, defaults.getHostSyncInterval());
        assertFalse(
                AmpOptions.builder().hostSyncInterval(100).build().readsEveryStepOn(CPU),
                "an interval set is kept, even the default's value");
        assertFalse(
                AmpOptions.builder()
                        .fusedOptimizer(FusedOptimizer.ON)
                        .build()
                        .readsEveryStepOn(CPU),
                "ON keeps the interval on the CPU, as on a GPU");
        assertFalse(
                AmpOptions.builder()
                        .fusedOptimizer(FusedOptimizer.OFF)
                        .build()
                        .readsEveryStepOn(CPU));
        System.setProperty(FusedOptimizer.PROPERTY, "on");
        assertFalse(
                AmpOptions.defaults().readsEveryStepOn(CPU),
                "-Ddjlamp.fusedOptimizer=on makes AUTO ON: the interval holds, as on a GPU");
    }

    @Test
    void whereOnlyTheFusedStepExistsAutoFusesOnAnySingleDevice() {
        // DJL's Nag: DJL's PyTorch engine has no update of its own
        assertTrue(FusedOptimizer.AUTO.wantsFusedStepsWhereOnlyFused(CPU));
        assertTrue(FusedOptimizer.AUTO.wantsFusedStepsWhereOnlyFused(ONE_GPU));
        assertFalse(FusedOptimizer.AUTO.wantsFusedStepsWhereOnlyFused(TWO_GPUS));
        assertTrue(FusedOptimizer.ON.wantsFusedStepsWhereOnlyFused(CPU));
        assertFalse(FusedOptimizer.OFF.wantsFusedStepsWhereOnlyFused(CPU));
    }

    @Test
    @SuppressWarnings("deprecation")
    void theDeprecatedAliasInTrainNamesTheSameProperty() {
        assertEquals(FusedOptimizer.PROPERTY, LossScalingOptimizer.FUSED_PROPERTY);
    }

    @Test
    void explicitSettingsIgnoreTheDeviceAndTheProperty() {
        System.setProperty(FusedOptimizer.PROPERTY, "off");
        assertTrue(FusedOptimizer.ON.wantsFusedSteps(CPU));
        System.setProperty(FusedOptimizer.PROPERTY, "on");
        assertFalse(FusedOptimizer.OFF.wantsFusedSteps(ONE_GPU));
    }

    @Test
    void thePropertyDecidesForAuto() {
        System.setProperty(FusedOptimizer.PROPERTY, "on");
        assertTrue(autoAsBuilt().wantsFusedSteps(CPU));
        System.setProperty(FusedOptimizer.PROPERTY, "TRUE");
        assertTrue(autoAsBuilt().wantsFusedSteps(CPU));
        System.setProperty(FusedOptimizer.PROPERTY, "false");
        assertFalse(autoAsBuilt().wantsFusedSteps(ONE_GPU));
        System.setProperty(FusedOptimizer.PROPERTY, " off ");
        assertFalse(autoAsBuilt().wantsFusedSteps(ONE_GPU));
        System.setProperty(FusedOptimizer.PROPERTY, "off");
        assertFalse(autoAsBuilt().wantsFusedSteps(CPU));
        System.setProperty(FusedOptimizer.PROPERTY, "auto");
        assertTrue(autoAsBuilt().wantsFusedSteps(ONE_GPU));
        assertTrue(autoAsBuilt().wantsFusedSteps(CPU));
        assertFalse(autoAsBuilt().wantsFusedSteps(TWO_GPUS));
    }

    @Test
    void thePropertyIsReadWhenTheOptionsAreBuiltNotWhenATrainerIsAttached() {
        AmpOptions before = AmpOptions.defaults();
        System.setProperty(FusedOptimizer.PROPERTY, "off");
        assertEquals(FusedOptimizer.AUTO, before.getFusedOptimizer());
        assertTrue(before.getFusedOptimizer().wantsFusedSteps(CPU), "AUTO alone reads nothing");
        assertEquals(FusedOptimizer.OFF, AmpOptions.defaults().getFusedOptimizer());
        System.setProperty(FusedOptimizer.PROPERTY, "on");
        assertEquals(
                FusedOptimizer.OFF,
                AmpOptions.builder().fusedOptimizer(FusedOptimizer.OFF).build().getFusedOptimizer(),
                "an explicit setting wins over the property");
    }

    @Test
    void aMistypedPropertyNamesTheSettingsThatWork() {
        System.setProperty(FusedOptimizer.PROPERTY, "yes");
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, FusedOptimizerTest::autoAsBuilt);
        assertTrue(e.getMessage().contains("-Ddjlamp.fusedOptimizer=yes"), e.getMessage());
        assertTrue(e.getMessage().contains("on, off or auto"), e.getMessage());
    }

    @Test
    void theOptionIsKeptAndNullIsRefused() {
        assertEquals(
                FusedOptimizer.OFF,
                AmpOptions.builder()
                        .fusedOptimizer(FusedOptimizer.OFF)
                        .build()
                        .getFusedOptimizer());
        NullPointerException e =
                assertThrows(
                        NullPointerException.class,
                        () -> AmpOptions.builder().fusedOptimizer(null));
        assertTrue(e.getMessage().contains("FusedOptimizer.AUTO, ON or OFF"), e.getMessage());
    }

    /** AUTO as options built now keep it: the property, if set, decided. */
    private static FusedOptimizer autoAsBuilt() {
        return AmpOptions.builder().fusedOptimizer(FusedOptimizer.AUTO).build().getFusedOptimizer();
    }
}
