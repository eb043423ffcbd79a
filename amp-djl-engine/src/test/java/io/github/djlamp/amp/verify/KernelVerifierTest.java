package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The kernel check on the real engine: correct kernels of large layers pass in bf16 and fp16
 * (rounding never fires the bound), and a kernel made wrong in one layout by a test double of the
 * engine layer is replaced by the other layout.
 */
class KernelVerifierTest {

    private static final List<MemoryLayout> BOTH =
            Arrays.asList(MemoryLayout.CHANNELS_LAST, MemoryLayout.CONTIGUOUS);

    @BeforeEach
    void forgetVerdicts() {
        KernelVerdicts.forgetAll();
    }

    /**
     * Layers built without a bias (ResNetV1's 3x3 and strided 1x1 convolutions) are checked like
     * any other: the check's own parameter store answers a bias that does not exist with null, as
     * DJL's does. Before, the check died on it and such layers ran unverified as NOT_CHECKED.
     */
    @Test
    void layersWithoutBiasAreChecked() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            Object[][] layers = {
                {
                    Conv2d.builder()
                            .setFilters(16)
                            .setKernelShape(new Shape(3, 3))
                            .optPadding(new Shape(1, 1))
                            .optBias(false)
                            .build(),
                    new Shape(2, 8, 8, 8)
                },
                {Linear.builder().setUnits(16).optBias(false).build(), new Shape(4, 32)},
            };
            for (Object[] layer : layers) {
                KernelVerdict verdict =
                        Layers.check(
                                backend,
                                (Block) layer[0],
                                (Shape) layer[1],
                                Precision.BF16,
                                BOTH,
                                manager);
                // checked, whatever a platform's kernels then show
                assertNotEquals(
                        KernelVerdict.Outcome.NOT_CHECKED,
                        verdict.getOutcome(),
                        verdict.toString());
            }
        }
    }

    @Test
    void smallFp16LayersPass() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            KernelVerdict verdict =
                    Layers.check(
                            backend,
                            conv(8, 3, 1),
                            new Shape(2, 8, 6, 6),
                            Precision.FP16,
                            BOTH,
                            manager);
            assertEquals(KernelVerdict.Outcome.VERIFIED, verdict.getOutcome(), verdict.toString());
        }
    }

    @Test
    void aWrongChannelsLastKernelIsReplacedByTheContiguousOne() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            // 16 channels: where the real contiguous kernel is right on every platform seen
            AmpBackend wrongInChannelsLast =
                    new WrongLayoutBackend(
                            AmpBackends.forManager(manager),
                            java.util.EnumSet.of(MemoryLayout.CHANNELS_LAST),
                            16);
            KernelVerdict verdict =
                    Layers.check(
                            wrongInChannelsLast,
                            conv(8, 3, 1),
                            new Shape(4, 16, 12, 12),
                            Precision.BF16,
                            BOTH,
                            manager);
            assertEquals(
                    KernelVerdict.Outcome.OTHER_LAYOUT, verdict.getOutcome(), verdict.toString());
            assertEquals(MemoryLayout.CONTIGUOUS, verdict.getLayout());
            assertTrue(
                    verdict.getFindings().get(0).startsWith("channels-last: output "),
                    verdict.toString());
        }
    }

    @Test
    void aKernelWrongInEveryLayoutFallsBackToFp32() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            KernelVerdict verdict =
                    Layers.check(
                            backend,
                            WrongLowPrecisionConv2d.create(8, 5, 2),
                            new Shape(4, 1, 12, 12),
                            Precision.BF16,
                            BOTH,
                            manager);
            assertEquals(
                    KernelVerdict.Outcome.FP32_FALLBACK, verdict.getOutcome(), verdict.toString());
            assertEquals(2, verdict.getFindings().size(), verdict.toString());
        }
    }

    /**
     * The fp32 passes run on four of the batch's samples while the 16-bit kernel runs at the full
     * shape: a kernel wrong in the last sample only (a partial last block of the batch) is found.
     */
    @Test
    void aKernelWrongInTheLastSampleIsFound() {
        KernelVerdict verdict =
                fallbackOnThirteenSamples(WrongLowPrecisionConv2d.wrongInLastSample(8, 3, 1));
        assertTrue(
                verdict.getFindings().get(0).startsWith("channels-last: output "),
                verdict.toString());
    }

    /**
     * Outside the sampled samples the check's cotangent is zero, so a right kernel's input gradient
     * is exactly zero there: a kernel that leaks one sample's gradient into the next one's is
     * found, though the sampled samples' own input gradients are right.
     */
    @Test
    void anInputGradientLeakingIntoOtherSamplesIsFound() {
        KernelVerdict verdict =
                fallbackOnThirteenSamples(WrongInputGradientConv2d.leakingToNextSample(4, 3, 1));
        assertTrue(
                verdict.getFindings()
                        .get(0)
                        .startsWith("channels-last: input gradient non-zero in 3 of 13 rows"),
                verdict.toString());
    }

    /** Checks a layer in bf16 on 13 samples of 4x6x6 (four sampled) and expects fp32. */
    private static KernelVerdict fallbackOnThirteenSamples(Block block) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            KernelVerdict verdict =
                    Layers.check(
                            AmpBackends.forManager(manager),
                            block,
                            new Shape(13, 4, 6, 6),
                            Precision.BF16,
                            BOTH,
                            manager);
            assertEquals(
                    KernelVerdict.Outcome.FP32_FALLBACK, verdict.getOutcome(), verdict.toString());
            return verdict;
        }
    }

    @Test
    void aWrongFp32KernelMakesThePlatformUnsound() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            KernelVerdict verdict =
                    Layers.check(
                            backend,
                            WrongLowPrecisionConv2d.wrongInFp32(8, 3, 1),
                            new Shape(2, 3, 8, 8),
                            Precision.BF16,
                            BOTH,
                            manager);
            assertEquals(
                    KernelVerdict.Outcome.PLATFORM_UNSOUND,
                    verdict.getOutcome(),
                    verdict.toString());
            assertTrue(
                    verdict.getFindings().get(0).contains("direct double-precision sum"),
                    verdict.toString());
        }
    }

    @Test
    void aSignatureIsCheckedOnce() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            KernelVerdict first =
                    Layers.check(
                            backend,
                            conv(8, 3, 1),
                            new Shape(2, 4, 8, 8),
                            Precision.BF16,
                            BOTH,
                            manager);
            KernelVerdict second =
                    Layers.check(
                            backend,
                            conv(8, 3, 1),
                            new Shape(2, 4, 8, 8),
                            Precision.BF16,
                            BOTH,
                            manager);
            KernelVerdict otherShape =
                    Layers.check(
                            backend,
                            conv(8, 3, 1),
                            new Shape(4, 4, 8, 8),
                            Precision.BF16,
                            BOTH,
                            manager);
            assertTrue(first == second, "the same signature reuses its verdict");
            assertTrue(first != otherShape, "another input shape is another signature");
            assertEquals(2, KernelVerdicts.all().size());
        }
    }

    @Test
    void theBoundScalesWithPrecisionAndReductionLength() {
        assertEquals(
                4 * 0x1p-8 + 2 * 25 * 0x1p-24, ErrorBound.of(Precision.BF16, 25).relative(), 0);
        assertEquals(
                4 * 0x1p-11 + 2 * 25088 * 0x1p-24,
                ErrorBound.of(Precision.FP16, 25088).relative(),
                0);
        assertEquals(0x1p-24, ErrorBound.of(Precision.FP16, 1).absolute(), 0);
    }

    static Block conv(int filters, int kernel, int pad) {
        return Conv2d.builder()
                .setFilters(filters)
                .setKernelShape(new Shape(kernel, kernel))
                .optPadding(new Shape(pad, pad))
                .build();
    }

    static NDArray input(NDManager manager, Shape shape) {
        return manager.randomNormal(0, 1, shape, DataType.FLOAT32);
    }
}
