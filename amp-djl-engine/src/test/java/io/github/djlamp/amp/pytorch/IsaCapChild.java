package io.github.djlamp.amp.pytorch;

import ai.djl.Device;
import java.util.Set;

/** The program {@code HardwareCapabilitiesTest} runs with an ISA cap in its environment. */
public final class IsaCapChild {

    private IsaCapChild() {}

    /**
     * Prints the cap in force and what an AVX512-BF16 CPU would pick under it.
     *
     * @param args none
     */
    public static void main(String[] args) {
        System.out.println("cap=" + OneDnnIsa.capInForce());
        System.out.println(
                "zen5 under the cap picks "
                        + HardwareCapabilities.forCpu(
                                        Device.cpu(),
                                        Set.of("avx512f", "avx512_bf16"),
                                        OneDnnIsa.capInForce())
                                .getRecommended());
    }
}
