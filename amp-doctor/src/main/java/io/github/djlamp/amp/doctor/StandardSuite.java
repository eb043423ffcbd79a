package io.github.djlamp.amp.doctor;

import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * What {@link PlatformCheck} runs: the canonical layers of {@link
 * io.github.djlamp.amp.verify.CanonicalKernels} in fp32 through plain DJL and in bf16 through
 * djl-amp's cast (both memory layouts), the 1x1 convolutions of a ResNet-50 bottleneck where
 * oneDNN's SIGFPE was found (fp32 and bf16), and a few tiny layers in fp16 (slow on CPUs).
 */
final class StandardSuite implements PlatformSuite {

    /** The layers {@code auto} checks before it picks 16 bits, the same as CanonicalKernels'. */
    static final List<LayerSpec> CANONICAL =
            List.of(
                    LayerSpec.conv(8, 5, 2, 32, 1, 28, 28),
                    LayerSpec.conv(8, 3, 1, 2, 3, 8, 8),
                    LayerSpec.conv(16, 3, 1, 16, 3, 32, 32),
                    LayerSpec.conv(64, 1, 0, 8, 64, 16, 16),
                    LayerSpec.conv(512, 1, 0, 16, 256, 8, 8),
                    LayerSpec.linear(128, 64, 256));

    /**
     * The 1x1 convolutions of DJL's ResNetV1-50 on 3x32x32 images at batch 4 (its first bottleneck,
     * at 8x8): plain DJL fp32 dies on the first backward of that model with SIGFPE in oneDNN's
     * {@code brgemm_convolution_bwd_utils::brg_blocking_t::est_eff_1x1} on the defective machines,
     * and its bf16 forward in {@code brgemm_convolution_utils}.
     */
    static final List<LayerSpec> BOTTLENECK =
            List.of(LayerSpec.conv(64, 1, 0, 4, 256, 8, 8), LayerSpec.conv(256, 1, 0, 4, 64, 8, 8));

    /** Tiny layers for fp16, which CPUs run slowly. */
    static final List<LayerSpec> TINY =
            List.of(
                    LayerSpec.conv(8, 5, 2, 2, 1, 12, 12),
                    LayerSpec.conv(8, 3, 1, 2, 3, 8, 8),
                    LayerSpec.conv(64, 1, 0, 2, 64, 4, 4),
                    LayerSpec.linear(128, 4, 256));

    private static final String BOTTLENECK_NOTE = " (ResNet-50 bottleneck)";

    @Override
    public List<KernelCase> cases() {
        List<KernelCase> cases = new ArrayList<>();
        for (LayerSpec layer : CANONICAL) {
            cases.add(Fp32Case.of(layer, ""));
        }
        for (LayerSpec layer : BOTTLENECK) {
            cases.add(Fp32Case.of(layer, BOTTLENECK_NOTE));
        }
        addLowPrecision(cases, CANONICAL, Precision.BF16, "");
        addLowPrecision(cases, BOTTLENECK, Precision.BF16, BOTTLENECK_NOTE);
        addLowPrecision(cases, TINY, Precision.FP16, "");
        return cases;
    }

    private static void addLowPrecision(
            List<KernelCase> cases, List<LayerSpec> layers, Precision precision, String note) {
        for (LayerSpec layer : layers) {
            if (layer.isConvolution()) {
                cases.add(LowPrecisionCase.of(layer, precision, MemoryLayout.CHANNELS_LAST, note));
            }
            cases.add(LowPrecisionCase.of(layer, precision, MemoryLayout.CONTIGUOUS, note));
        }
    }
}
