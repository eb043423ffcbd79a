package io.github.djlamp.amp.pytorch;

import ai.djl.Device;
import ai.djl.util.cuda.CudaUtils;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.Locale;
import java.util.Set;

/**
 * Decides what a device computes usefully in 16 bits: Tensor Cores on CUDA compute capability 7.0
 * and later (fp16), bf16 from 8.0; bf16 on CPUs with AVX512-BF16 or AMX.
 */
final class HardwareCapabilities {

    private static final Path CPU_INFO = Paths.get("/proc/cpuinfo");

    private HardwareCapabilities() {}

    static DeviceCapabilities of(Device device) {
        if (device.isGpu()) {
            String capability;
            try {
                capability = CudaUtils.getComputeCapability(device.getDeviceId());
            } catch (RuntimeException e) {
                return new DeviceCapabilities(
                        device,
                        false,
                        false,
                        Precision.FP32,
                        "the CUDA compute capability could not be read (" + e.getMessage() + ")");
            }
            return forCuda(device, capability);
        }
        if (Device.Type.CPU.equals(device.getDeviceType())) {
            return forCpu(
                    device, cpuFlags(), OneDnnIsa.capInForce(), LibtorchOneDnn.usedByTraining());
        }
        return new DeviceCapabilities(
                device,
                false,
                false,
                Precision.FP32,
                "djl-amp knows no reduced-precision fast path for device type "
                        + device.getDeviceType());
    }

    /**
     * Capabilities of a CUDA device from its compute capability as DJL reports it ("86" for 8.6).
     */
    static DeviceCapabilities forCuda(Device device, String computeCapability) {
        int split = computeCapability.length() - 1;
        int major = Integer.parseInt(computeCapability.substring(0, split));
        int minor = Integer.parseInt(computeCapability.substring(split));
        String cc = "CUDA compute capability " + major + "." + minor;
        // fp16 arithmetic needs 5.3; PyTorch computes bf16 from 8.0 (Ampere) on
        boolean fp16 = major > 5 || (major == 5 && minor >= 3);
        boolean bf16 = major >= 8;
        if (bf16) {
            return new DeviceCapabilities(
                    device,
                    true,
                    true,
                    true,
                    true,
                    Precision.BF16,
                    cc
                            + " has bf16 Tensor Cores; bf16 keeps fp32's range and needs no loss scaling");
        }
        if (major == 7) {
            return new DeviceCapabilities(
                    device,
                    true,
                    true,
                    false,
                    false,
                    Precision.FP16,
                    cc + " has fp16 Tensor Cores but no bf16: fp16 with dynamic loss scaling");
        }
        return new DeviceCapabilities(
                device,
                fp16,
                false,
                false,
                false,
                Precision.FP32,
                cc
                        + " has no Tensor Cores (they need 7.0 or later): mixed precision would"
                        + " not speed this GPU up");
    }

    /** Capabilities of a CPU from its {@code /proc/cpuinfo} flags, with no ISA cap in force. */
    static DeviceCapabilities forCpu(Device device, Set<String> flags) {
        return forCpu(device, flags, null);
    }

    /**
     * Capabilities of a CPU from its {@code /proc/cpuinfo} flags and the ISA cap oneDNN runs under
     * ({@code ONEDNN_MAX_CPU_ISA}, null for none): under a cap below AVX512_CORE_BF16 oneDNN
     * emulates bf16 whatever the flags say (measured 0.15x plain DJL's fp32).
     */
    static DeviceCapabilities forCpu(Device device, Set<String> flags, String isaCap) {
        return forCpu(device, flags, isaCap, true);
    }

    /**
     * Capabilities of a CPU from its flags, the ISA cap and whether libtorch uses oneDNN: with
     * oneDNN off ({@link HiddenCacheCure}) libtorch's own CPU kernels compute bf16 and fp16 without
     * the CPU's 16-bit instructions, slower than fp32.
     */
    static DeviceCapabilities forCpu(
            Device device, Set<String> flags, String isaCap, boolean oneDnnOn) {
        boolean bf16 = flags.contains("avx512_bf16") || flags.contains("amx_bf16");
        boolean fp16 = flags.contains("avx512_fp16") || flags.contains("amx_fp16");
        if (!oneDnnOn) {
            return new DeviceCapabilities(
                    device,
                    false,
                    false,
                    Precision.FP32,
                    "libtorch's oneDNN is off in this process (djl-amp turns it off where the"
                            + " CPU's cache topology is hidden), and libtorch's own kernels compute"
                            + " 16 bits slower than fp32");
        }
        if (bf16 && !OneDnnIsa.allowsNativeBf16(isaCap)) {
            return new DeviceCapabilities(
                    device,
                    false,
                    false,
                    Precision.FP32,
                    "this CPU has AVX512-BF16, but oneDNN runs under "
                            + OneDnnIsa.VARIABLE
                            + "="
                            + isaCap
                            + ", below AVX512_CORE_BF16: bf16 is emulated there and slower than"
                            + " fp32");
        }
        if (bf16) {
            String which = flags.contains("amx_bf16") ? "AMX-BF16" : "AVX512-BF16";
            return new DeviceCapabilities(
                    device,
                    fp16,
                    true,
                    Precision.BF16,
                    "this CPU has " + which + ": bf16 matrix math is faster than fp32 here");
        }
        return new DeviceCapabilities(
                device,
                fp16,
                false,
                Precision.FP32,
                "this CPU has neither AVX512-BF16 nor AMX: 16-bit compute is emulated and mixed"
                        + " precision would slow this machine down");
    }

    static Set<String> cpuFlags() {
        try {
            for (String line : Files.readAllLines(CPU_INFO)) {
                if (line.startsWith("flags")) {
                    String value = line.substring(line.indexOf(':') + 1).trim();
                    return new HashSet<>(
                            Arrays.asList(value.toLowerCase(Locale.ROOT).split("\\s+")));
                }
            }
        } catch (IOException | RuntimeException e) {
            return Collections.emptySet();
        }
        return Collections.emptySet();
    }
}
