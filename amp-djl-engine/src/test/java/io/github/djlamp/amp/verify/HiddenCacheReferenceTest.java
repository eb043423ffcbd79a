package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.Arrays;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * On a CPU whose cache topology the kernel hides (issue 43: there a kernel check's fp32 backward on
 * its sampled rows divided by zero inside oneDNN and ended the JVM), the check's fp32 passes go
 * through the engine's {@code referencePass}, which runs them on libtorch's own kernels; the 16-bit
 * kernel is judged as it is where oneDNN computes the reference. Taken for such a machine here
 * through {@link CacheTopology#TEST_PROPERTY}.
 */
class HiddenCacheReferenceTest {

    @AfterEach
    void forget() {
        System.clearProperty(CacheTopology.TEST_PROPERTY);
        KernelVerdicts.forgetAll();
    }

    @Test
    void theFp32PassesRunThroughTheReferencePassAndJudgeAsWithOneDnn() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend real = AmpBackends.forManager(manager);
            System.setProperty(CacheTopology.TEST_PROPERTY, "visible");
            KernelVerdict withOneDnn = check(new CountingReference(real), manager);
            KernelVerdicts.forgetAll();
            System.setProperty(CacheTopology.TEST_PROPERTY, "hidden");
            CountingReference counting = new CountingReference(real);
            KernelVerdict withoutOneDnn = check(counting, manager);
            assertTrue(counting.passes > 0, "the fp32 passes ran through referencePass");
            assertEquals(
                    withOneDnn.getOutcome(), withoutOneDnn.getOutcome(), withoutOneDnn::toString);
            assertEquals(withOneDnn.getLayout(), withoutOneDnn.getLayout());
            System.out.println(
                    "bf16 convolution judged " + withoutOneDnn.getOutcome() + " both ways");
        }
    }

    /**
     * Attention's batched products are checked the same way (before, their fp32 passes were not).
     */
    @Test
    void aProductsFp32PassesRunThroughTheReferencePassToo() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend real = AmpBackends.forManager(manager);
            System.setProperty(CacheTopology.TEST_PROPERTY, "hidden");
            CountingReference counting = new CountingReference(real);
            NDArray left = manager.randomNormal(new Shape(6, 16, 32));
            NDArray right = manager.randomNormal(new Shape(6, 32, 16));
            left.setRequiresGradient(true);
            right.setRequiresGradient(true);
            KernelVerdict verdict =
                    new KernelVerifier(counting)
                            .productVerdict(
                                    "test/attention", "scores", left, right, Precision.BF16, true);
            assertTrue(counting.passes > 0, "the fp32 passes ran through referencePass");
            System.out.println("bf16 product judged " + verdict.getOutcome());
        }
    }

    /**
     * Six samples, so that the fp32 passes run on four sampled rows, a shape training never runs.
     */
    private static KernelVerdict check(AmpBackend backend, NDManager manager) {
        return Layers.check(
                backend,
                KernelVerifierTest.conv(8, 3, 1),
                new Shape(6, 4, 10, 10),
                Precision.BF16,
                Arrays.asList(MemoryLayout.CHANNELS_LAST, MemoryLayout.CONTIGUOUS),
                manager);
    }

    /** The real engine, counting the passes it runs as references. */
    private static final class CountingReference extends ForwardingBackend {
        int passes;

        CountingReference(AmpBackend real) {
            super(real);
        }

        @Override
        public <T> T referencePass(Device device, Supplier<T> pass) {
            passes++;
            return real.referencePass(device, pass);
        }
    }
}
