package io.github.djlamp.examples;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import java.util.ArrayList;
import java.util.List;

/**
 * What "auto" picks on this machine, and why: djl-amp reads each device's capabilities (CUDA
 * compute capability, or the CPU's AVX512-BF16 / AMX flags) and recommends a precision with its
 * reason.
 *
 * <pre>
 * mvn -B -q -pl examples -am compile exec:java -Dexec.mainClass=io.github.djlamp.examples.PrecisionChoice
 * </pre>
 */
public final class PrecisionChoice {

    private PrecisionChoice() {}

    /**
     * Prints the choice for every device DJL trains on by default (every GPU, else the CPU).
     *
     * @param args ignored: this example only reads the hardware, it is instant
     */
    public static void main(String[] args) {
        for (String line : describe()) {
            System.out.println(line);
        }
    }

    /**
     * Describes the choice for each device.
     *
     * @return one block of lines per device
     */
    static List<String> describe() {
        List<String> lines = new ArrayList<>();
        try (NDManager manager = NDManager.newBaseManager()) {
            AmpBackend backend = AmpBackends.forManager(manager);
            for (Device device : Engine.getInstance().getDevices()) {
                DeviceCapabilities capabilities = backend.capabilities(device);
                PrecisionPolicy auto =
                        PrecisionPolicy.auto().resolveAuto(capabilities.getRecommended());
                lines.add("Device " + device + ":");
                lines.add("  fp16 fast: " + capabilities.isFp16Fast());
                lines.add("  bf16 fast: " + capabilities.isBf16Fast());
                lines.add("  recommended: " + capabilities.getRecommended().shortName());
                lines.add("  reason: " + capabilities.getReason());
                lines.add("  Amp.wrap(block, \"auto\") trains with policy " + auto);
            }
        }
        return lines;
    }
}
