package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The kernel check's comparison allows, at every element, the tensor's fp32 accumulation error
 * (transform-based convolutions bound their error against the whole tensor), and still flags a
 * wrong value.
 */
class ComparisonTest {

    private static String check(float[] actual, float[] expected, float[] sums) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            return Comparison.firstFailure(
                    new NDList(manager.create(actual)),
                    new NDList(manager.create(expected)),
                    new NDList(manager.create(sums)),
                    List.of("weight gradient"),
                    new long[] {98},
                    false,
                    Precision.BF16,
                    backend);
        }
    }

    @Test
    void aRoundingErrorWhereTheProductsCancelIsNotADefect() {
        // as cuDNN's bf16 weight gradient on an H100: 1e-7 off where S is near 0, scale 26
        assertNull(
                check(
                        new float[] {26f, 1e-7f, 1f},
                        new float[] {26f, 0f, 1f},
                        new float[] {26f, 1e-9f, 1f}));
    }

    @Test
    void aValueOffByHalfItsScaleIsStillWrong() {
        String failure =
                check(
                        new float[] {26f, 0f, 1.5f},
                        new float[] {26f, 0f, 1f},
                        new float[] {26f, 1e-9f, 1f});
        assertNotNull(failure);
        assertTrue(failure.contains("1 of 3 values wrong"), failure);
    }

    @Test
    void theFloorIsTheAccumulationTermOfTheLargestSum() {
        ErrorBound bound = ErrorBound.of(Precision.BF16, 98);
        double floor = 2 * 98 * 0x1p-24 * 26;
        assertTrue(Math.abs(bound.tolerance(0, 26) - (bound.absolute() + floor)) < 1e-12);
        // about a thousandth of a percent of the scale here: far below the defect's 70%
        assertTrue(floor / 26 < 2e-5);
    }
}
