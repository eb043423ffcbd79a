package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The check of attention's 16-bit products (two activations multiplied, batched over samples and
 * heads) on the real engine: right products pass in bf16 and fp16, a product wrong in the last
 * sample only is found though the fp32 passes cover four samples, and a wrong fp32 reference makes
 * the platform unsound.
 */
class ProductCheckTest {

    @BeforeEach
    void forgetVerdicts() {
        KernelVerdicts.forgetAll();
    }

    @Test
    void rightProductsPassWithTheirGradients() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            // scores (B, N, S, H) x (B, N, H, S) and weighted values (B, N, S, S) x (B, N, S, H)
            KernelVerdict scores =
                    check(
                            backend,
                            new Shape(9, 2, 6, 8),
                            new Shape(9, 2, 8, 6),
                            Precision.BF16,
                            manager);
            KernelVerdict values =
                    check(
                            backend,
                            new Shape(9, 2, 6, 6),
                            new Shape(9, 2, 6, 8),
                            Precision.BF16,
                            manager);
            KernelVerdict fp16 =
                    check(
                            backend,
                            new Shape(3, 2, 4, 8),
                            new Shape(3, 2, 8, 4),
                            Precision.FP16,
                            manager);
            for (KernelVerdict verdict : new KernelVerdict[] {scores, values, fp16}) {
                assertEquals(
                        KernelVerdict.Outcome.VERIFIED, verdict.getOutcome(), verdict.toString());
            }
            assertTrue(scores.getOperation().startsWith("MatMul (test product"), scores.toString());
            assertSame(
                    scores,
                    check(
                            backend,
                            new Shape(9, 2, 6, 8),
                            new Shape(9, 2, 8, 6),
                            Precision.BF16,
                            manager),
                    "a signature is checked once");
        }
    }

    /**
     * The fp32 passes cover four of the 13 samples, the 16-bit product all of them: a product wrong
     * in the last sample only (a partial last block) is found.
     */
    @Test
    void aProductWrongInTheLastSampleFallsBackToFp32() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend =
                    WrongProductBackend.wrongInLastSample(AmpBackends.forManager(manager));
            KernelVerdict verdict =
                    check(
                            backend,
                            new Shape(13, 2, 5, 8),
                            new Shape(13, 2, 8, 5),
                            Precision.BF16,
                            manager);
            assertEquals(
                    KernelVerdict.Outcome.FP32_FALLBACK, verdict.getOutcome(), verdict.toString());
            assertTrue(verdict.getFindings().get(0).startsWith("output "), verdict.toString());
        }
    }

    @Test
    void aWrongFp32ProductMakesThePlatformUnsound() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = WrongProductBackend.wrongInFp32(AmpBackends.forManager(manager));
            KernelVerdict verdict =
                    check(
                            backend,
                            new Shape(2, 2, 5, 64),
                            new Shape(2, 2, 64, 5),
                            Precision.BF16,
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

    private static KernelVerdict check(
            AmpBackend backend, Shape left, Shape right, Precision precision, NDManager manager) {
        Engine.getInstance().setRandomSeed(5);
        UnaryOperator<NDArray> tracked =
                array -> {
                    array.setRequiresGradient(true);
                    return array;
                };
        NDArray a = tracked.apply(manager.randomNormal(0, 1, left, DataType.FLOAT32));
        NDArray b = tracked.apply(manager.randomNormal(0, 1, right, DataType.FLOAT32));
        return new KernelVerifier(backend)
                .productVerdict("test/attention", "test product", a, b, precision, true);
    }
}
