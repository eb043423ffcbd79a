package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import org.junit.jupiter.api.Test;

class DeviceSupportTest {

    private static final DeviceCapabilities TURING =
            new DeviceCapabilities(
                    Device.gpu(), true, true, false, false, Precision.FP16, "CUDA 7.5, no bf16");

    private static final DeviceCapabilities OLD_GPU =
            new DeviceCapabilities(
                    Device.gpu(), false, false, false, false, Precision.FP32, "CUDA 5.2");

    @Test
    void capabilitiesAnswerForEveryPrecision() {
        for (Precision precision : Precision.values()) {
            assertDoesNotThrow(() -> TURING.isSupported(precision));
            assertDoesNotThrow(() -> TURING.isFast(precision));
        }
        assertTrue(OLD_GPU.isSupported(Precision.FP32));
        assertTrue(OLD_GPU.isFast(Precision.FP32));
        assertTrue(TURING.isSupported(Precision.FP16) && TURING.isFast(Precision.FP16));
        assertFalse(TURING.isSupported(Precision.BF16) || TURING.isFast(Precision.BF16));
    }

    @Test
    void bfloat16WhereTheDeviceHasNoneIsRejected() {
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () -> DeviceSupport.check(PrecisionPolicy.mixedBfloat16(), TURING));
        assertTrue(e.getMessage().contains("bfloat16"), e.getMessage());
        assertTrue(e.getMessage().contains("\"auto\" (here: float16)"), e.getMessage());
        assertTrue(e.getMessage().contains("\"mixed_float16\""), e.getMessage());
    }

    @Test
    void float16WhereTheDeviceHasNoneIsRejected() {
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () -> DeviceSupport.check(PrecisionPolicy.mixedFloat16(), OLD_GPU));
        assertTrue(e.getMessage().contains("cannot compute in"), e.getMessage());
        assertTrue(e.getMessage().contains("(here: float32)"), e.getMessage());
    }

    @Test
    void aSlowDeviceIsWarnedAboutOncePerPrecisionForTheProcess() {
        // a device no other test uses: the warnings are the process's
        DeviceCapabilities slow =
                new DeviceCapabilities(
                        Device.gpu(7), true, false, true, false, Precision.FP32, "emulated");
        assertTrue(DeviceSupport.check(PrecisionPolicy.mixedFloat16(), slow), "the first trainer");
        assertFalse(DeviceSupport.check(PrecisionPolicy.mixedFloat16(), slow), "the next trial");
        assertTrue(DeviceSupport.check(PrecisionPolicy.mixedBfloat16(), slow), "bf16 is new");
        assertFalse(DeviceSupport.check(PrecisionPolicy.float32(), slow), "fp32 is fast");
    }

    @Test
    void supportedButSlowOnlyWarns() {
        DeviceCapabilities cpu =
                new DeviceCapabilities(Device.cpu(), false, true, Precision.BF16, "avx512_bf16");
        assertDoesNotThrow(() -> DeviceSupport.check(PrecisionPolicy.mixedFloat16(), cpu));
        assertDoesNotThrow(() -> DeviceSupport.check(PrecisionPolicy.float32(), OLD_GPU));
    }
}
