package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.EnumSet;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@code auto} asks the kernels, not only the flags: a 16-bit precision the flags recommend is kept
 * when the canonical layers pass, and replaced by fp32, with the failing check named, when one
 * needs the fp32 fallback (an engine-layer double wrong for 1-channel images in every layout).
 */
class CanonicalKernelsTest {

    private static final DeviceCapabilities FLAGS_SAY_BF16 =
            new DeviceCapabilities(
                    Device.cpu(), false, true, Precision.BF16, "the flags say AVX512-BF16");

    @BeforeEach
    void forgetVerdicts() {
        KernelVerdicts.forgetAll();
    }

    @Test
    void thePlatformsOwnKernelsDecideTheRecommendation() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            DeviceCapabilities confirmed =
                    CanonicalKernels.confirm(backend, FLAGS_SAY_BF16, manager);
            assertEquals(CanonicalKernels.describe().size(), KernelVerdicts.all().size());
            boolean needsFp32 = false;
            for (KernelVerdict verdict : KernelVerdicts.all()) {
                needsFp32 |=
                        !verdict.runsLowPrecision()
                                || verdict.getOutcome() == KernelVerdict.Outcome.PLATFORM_UNSOUND;
            }
            if (needsFp32) {
                // whether these verdicts are right is PlatformKernelsTest's question
                System.out.println("PLATFORM DEFECT: " + confirmed.getReason());
                assertEquals(Precision.FP32, confirmed.getRecommended());
            } else {
                assertSame(FLAGS_SAY_BF16, confirmed, KernelVerdicts.all().toString());
            }
        }
    }

    @Test
    void aStemWrongInEveryLayoutMakesAutoChooseFp32AndSayWhy() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend broken =
                    new WrongLayoutBackend(
                            AmpBackends.forManager(manager),
                            EnumSet.of(MemoryLayout.CHANNELS_LAST, MemoryLayout.CONTIGUOUS));
            DeviceCapabilities confirmed =
                    CanonicalKernels.confirm(broken, FLAGS_SAY_BF16, manager);
            assertEquals(Precision.FP32, confirmed.getRecommended());
            String reason = confirmed.getReason();
            assertTrue(
                    reason.startsWith("the flags say AVX512-BF16, but its bfloat16 kernels failed"),
                    reason);
            assertTrue(
                    reason.contains("kernel (5, 5)") && reason.contains("(32, 1, 28, 28)"), reason);
            assertTrue(reason.contains("ONEDNN_MAX_CPU_ISA=AVX2"), reason);
        }
    }

    @Test
    void aKernelWrongInOneLayoutOnlyChangesNothing() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend real = AmpBackends.forManager(manager);
            AmpBackend broken = new WrongLayoutBackend(real);
            assertEquals(
                    CanonicalKernels.confirm(real, FLAGS_SAY_BF16, manager).getRecommended(),
                    CanonicalKernels.confirm(broken, FLAGS_SAY_BF16, manager).getRecommended(),
                    "a kernel wrong in one layout only runs in the other: auto's choice is the"
                            + " platform's own");
        }
    }
}
