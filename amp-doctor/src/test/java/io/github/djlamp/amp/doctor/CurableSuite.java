package io.github.djlamp.amp.doctor;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.Shape;
import java.util.List;

/**
 * A child-JVM suite whose one defect the cure's environment variable removes, as {@code
 * ONEDNN_MAX_CPU_ISA=AVX2} removes oneDNN's, for {@link PlatformCheckDefectTest}: a convolution
 * that computes wrong unless the child's environment holds the cure.
 */
final class CurableSuite implements PlatformSuite {

    static final String CURABLE = "wrong/unless-cured";

    @Override
    public List<KernelCase> cases() {
        return List.of(
                Fp32Case.of(DefectSuite.SMALL_LINEAR, ""),
                new Fp32Case(
                        DefectSuite.SMALL_CONV,
                        CURABLE,
                        "a convolution wrong unless " + PlatformCheck.CURE + " is set") {
                    @Override
                    NDArray forward(NDArray input, NDArray weight, NDArray bias) {
                        NDArray output = super.forward(input, weight, bias);
                        String isa = System.getenv(PlatformCheck.CURE_VARIABLE);
                        if (PlatformCheck.CURE_VALUE.equals(isa)) {
                            return output;
                        }
                        // the factor made by the engine: DJL's mul(Number) leaves the number
                        // backward reads to the garbage collector
                        try (NDArray factor = output.getManager().full(new Shape(), 1.5f)) {
                            return output.mul(factor);
                        }
                    }
                });
    }
}
