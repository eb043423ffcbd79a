package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * libtorch's own autocast on a CUDA device, switched on through the engine layer; run only where
 * DJL sees a GPU ({@link EngineAutocastTest} covers the CPU's autocast on any machine).
 */
class CudaAutocastTest {

    /** Returns whether DJL sees a GPU, printing why the test is not run where it sees none. */
    private static boolean gpuPresent(String test) {
        if (Engine.getEngine("PyTorch").getGpuCount() == 0) {
            System.out.println(
                    "CudaAutocastTest." + test + ": DJL sees no GPU on this machine: not run");
            return false;
        }
        return true;
    }

    @Test
    void matrixProductsInsideComputeInTheRequestedPrecisionAndTheStateIsPutBack() {
        if (!gpuPresent("matrixProductsInsideComputeInTheRequestedPrecisionAndTheStateIsPutBack")) {
            return;
        }
        Device gpu = Device.gpu();
        try (NDManager manager = NDManager.newBaseManager(gpu, "PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            LibtorchAutocast autocast = LibtorchAutocast.get();
            NDArray a = manager.ones(new Shape(4, 4));
            assertFalse(autocast.isEnabled(gpu));
            for (Precision precision : new Precision[] {Precision.BF16, Precision.FP16}) {
                NDArray product =
                        backend.withEngineAutocast(
                                gpu,
                                precision,
                                () -> {
                                    assertTrue(autocast.isEnabled(gpu));
                                    assertEquals(precision, autocast.precision(gpu));
                                    return a.matMul(a);
                                });
                assertEquals(precision, backend.precisionOf(product));
                assertFalse(autocast.isEnabled(gpu), "autocast is off again");
                assertEquals(Precision.FP32, backend.precisionOf(a.matMul(a)));
            }
        }
    }

    /**
     * libtorch's CUDA autocast wraps {@code _cudnn_rnn} with a cast to fp16 whatever the autocast
     * precision (ATen's cudnn/AutocastRNN.cpp: {@code cached_cast(at::kHalf, ...)}): LSTM, GRU and
     * RNN compute in fp16 under bf16 autocast too.
     */
    @Test
    void recurrentBlocksComputeInFp16UnderBothPrecisions() {
        if (!gpuPresent("recurrentBlocksComputeInFp16UnderBothPrecisions")) {
            return;
        }
        Device gpu = Device.gpu();
        Map<String, Supplier<Block>> blocks = new LinkedHashMap<>();
        blocks.put("LSTM", EngineAutocastTest::lstm);
        blocks.put("GRU", EngineAutocastTest::gru);
        blocks.put("RNN", EngineAutocastTest::rnn);
        // all six run before anything is asserted, so that one run on a GPU tells every outcome
        Map<String, String> computed = new LinkedHashMap<>();
        for (Precision precision : new Precision[] {Precision.BF16, Precision.FP16}) {
            for (Map.Entry<String, Supplier<Block>> block : blocks.entrySet()) {
                String outcome;
                try {
                    outcome =
                            "computed "
                                    + EngineAutocastTest.runUnderAutocast(
                                            gpu, block.getValue().get(), precision);
                } catch (RuntimeException | AssertionError e) {
                    outcome = "failed: " + e;
                }
                String run = "CUDA autocast " + precision + ": " + block.getKey();
                System.out.println(run + " " + outcome);
                computed.put(run, outcome);
                assertFalse(LibtorchAutocast.get().isEnabled(gpu), "autocast is off again");
            }
        }
        for (Map.Entry<String, String> run : computed.entrySet()) {
            assertEquals("computed FP16", run.getValue(), run.getKey() + "; all: " + computed);
        }
    }
}
