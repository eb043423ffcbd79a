package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import java.util.Set;
import org.junit.jupiter.api.Test;

class HardwareCapabilitiesTest {

    @Test
    void cudaCapabilityPicksThePrecision() {
        assertEquals(
                Precision.BF16, HardwareCapabilities.forCuda(Device.gpu(), "80").getRecommended());
        assertEquals(
                Precision.BF16, HardwareCapabilities.forCuda(Device.gpu(), "90").getRecommended());
        DeviceCapabilities volta = HardwareCapabilities.forCuda(Device.gpu(), "70");
        assertEquals(Precision.FP16, volta.getRecommended());
        assertTrue(volta.isFp16Fast());
        assertFalse(volta.isBf16Fast());
        assertEquals(
                Precision.FP16, HardwareCapabilities.forCuda(Device.gpu(), "75").getRecommended());
        DeviceCapabilities pascal = HardwareCapabilities.forCuda(Device.gpu(), "61");
        assertEquals(Precision.FP32, pascal.getRecommended());
        assertTrue(pascal.getReason().contains("no Tensor Cores"), pascal.getReason());
        assertTrue(pascal.isSupported(Precision.FP16), "6.1 computes fp16, slowly");
        assertFalse(pascal.isSupported(Precision.BF16));
        assertFalse(volta.isSupported(Precision.BF16), "bf16 needs 8.0");
        assertFalse(HardwareCapabilities.forCuda(Device.gpu(), "52").isSupported(Precision.FP16));
        assertEquals(
                Precision.BF16, HardwareCapabilities.forCuda(Device.gpu(), "100").getRecommended());
    }

    @Test
    void cpuFlagsPickThePrecision() {
        assertEquals(
                Precision.BF16,
                HardwareCapabilities.forCpu(Device.cpu(), Set.of("avx512f", "avx512_bf16"))
                        .getRecommended());
        assertEquals(
                Precision.BF16,
                HardwareCapabilities.forCpu(Device.cpu(), Set.of("amx_bf16", "amx_tile"))
                        .getRecommended());
        DeviceCapabilities old = HardwareCapabilities.forCpu(Device.cpu(), Set.of("avx2", "fma"));
        assertEquals(Precision.FP32, old.getRecommended());
        assertTrue(old.getReason().contains("slow this machine down"), old.getReason());
    }

    @Test
    void thisMachineIsDescribedFromItsOwnFlags() {
        Set<String> flags = HardwareCapabilities.cpuFlags();
        DeviceCapabilities caps = AmpBackends.forEngine("PyTorch").capabilities(Device.cpu());
        boolean bf16 = flags.contains("avx512_bf16") || flags.contains("amx_bf16");
        assertEquals(
                bf16 ? Precision.BF16 : Precision.FP32, caps.getRecommended(), caps.toString());
    }
}
