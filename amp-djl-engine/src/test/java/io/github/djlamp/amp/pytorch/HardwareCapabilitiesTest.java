package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import java.nio.file.Path;
import java.util.List;
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
        // an ISA cap in force (ONEDNN_MAX_CPU_ISA=AVX2 exported, say) makes bf16 emulated
        boolean nativeBf16 = bf16 && OneDnnIsa.allowsNativeBf16(OneDnnIsa.capInForce());
        // so does oneDNN off (djl-amp's cure of a hidden cache topology, once Amp.configure ran)
        nativeBf16 &= LibtorchOneDnn.usedByTraining();
        assertEquals(
                nativeBf16 ? Precision.BF16 : Precision.FP32,
                caps.getRecommended(),
                caps.toString());
    }

    /**
     * Under a oneDNN cap below AVX512_CORE_BF16 an AVX512-BF16 CPU emulates bf16 (0.15x plain DJL's
     * fp32 on the machine of issue 43): {@code auto} picks fp32 and says why.
     */
    @Test
    void aCapBelowAvx512Bf16MakesAutoPickFp32() {
        Set<String> zen5 = Set.of("avx2", "avx512f", "avx512_bf16");
        for (String cap :
                new String[] {"AVX2", "avx2", "AVX512_CORE", "AVX512_CORE_VNNI", "SSE41"}) {
            DeviceCapabilities capped = HardwareCapabilities.forCpu(Device.cpu(), zen5, cap);
            assertEquals(Precision.FP32, capped.getRecommended(), cap);
            assertFalse(capped.isBf16Fast(), cap);
            assertTrue(
                    capped.getReason().contains("ONEDNN_MAX_CPU_ISA=" + cap), capped.getReason());
        }
        for (String cap : new String[] {null, "AVX512_CORE_BF16", "AVX512_CORE_AMX", "ALL"}) {
            assertEquals(
                    Precision.BF16,
                    HardwareCapabilities.forCpu(Device.cpu(), zen5, cap).getRecommended(),
                    String.valueOf(cap));
        }
    }

    /**
     * With libtorch's oneDNN off (djl-amp's cure where the cache topology is hidden) its own
     * kernels compute bf16: {@code auto} picks fp32 on any CPU, and says why.
     */
    @Test
    void withOneDnnOffAutoPicksFp32() {
        for (Set<String> flags :
                List.of(
                        Set.of("avx2", "avx512f", "avx512_bf16"),
                        Set.of("amx_bf16", "amx_tile", "avx512_fp16"),
                        Set.of("avx2", "fma"))) {
            DeviceCapabilities off = HardwareCapabilities.forCpu(Device.cpu(), flags, null, false);
            assertEquals(Precision.FP32, off.getRecommended(), flags::toString);
            assertFalse(off.isBf16Fast(), flags::toString);
            assertFalse(off.isFp16Fast(), flags::toString);
            assertTrue(off.getReason().contains("oneDNN is off"), off.getReason());
        }
        assertEquals(
                Precision.BF16,
                HardwareCapabilities.forCpu(Device.cpu(), Set.of("avx512_bf16"), null, true)
                        .getRecommended());
    }

    /**
     * The cap comes from the environment the JVM started with, as oneDNN reads it, and is part of
     * the key of the kept verdicts.
     */
    @Test
    void theCapInForceIsReadFromTheEnvironment() throws Exception {
        ProcessBuilder child =
                new ProcessBuilder(
                                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                                "-cp",
                                System.getProperty("java.class.path"),
                                IsaCapChild.class.getName())
                        .redirectErrorStream(true);
        child.environment().remove(OneDnnIsa.OLD_VARIABLE);
        child.environment().put(OneDnnIsa.VARIABLE, "AVX2");
        Process process = child.start();
        String output = new String(process.getInputStream().readAllBytes());
        assertEquals(0, process.waitFor(), output);
        assertTrue(output.contains("cap=AVX2"), output);
        assertTrue(output.contains("zen5 under the cap picks FP32"), output);
    }
}
