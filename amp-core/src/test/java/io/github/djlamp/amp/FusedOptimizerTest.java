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
    void theDefaultFusesOnOneGpuOnly() {
        assertEquals(FusedOptimizer.AUTO, AmpOptions.defaults().getFusedOptimizer());
        assertTrue(FusedOptimizer.AUTO.wantsFusedSteps(ONE_GPU), "one GPU: no host read per step");
        assertFalse(FusedOptimizer.AUTO.wantsFusedSteps(CPU), "CPU: DJL's update, exact per step");
        assertFalse(FusedOptimizer.AUTO.wantsFusedSteps(TWO_GPUS), "fused steps need one device");
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
        System.setProperty(FusedOptimizer.PROPERTY, "auto");
        assertTrue(autoAsBuilt().wantsFusedSteps(ONE_GPU));
        assertFalse(autoAsBuilt().wantsFusedSteps(CPU));
    }

    @Test
    void thePropertyIsReadWhenTheOptionsAreBuiltNotWhenATrainerIsAttached() {
        AmpOptions before = AmpOptions.defaults();
        System.setProperty(FusedOptimizer.PROPERTY, "on");
        assertEquals(FusedOptimizer.AUTO, before.getFusedOptimizer());
        assertFalse(before.getFusedOptimizer().wantsFusedSteps(CPU), "AUTO alone reads nothing");
        assertEquals(FusedOptimizer.ON, AmpOptions.defaults().getFusedOptimizer());
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
