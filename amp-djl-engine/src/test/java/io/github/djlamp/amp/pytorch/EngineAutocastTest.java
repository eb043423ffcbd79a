package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.core.Linear;
import ai.djl.nn.recurrent.GRU;
import ai.djl.nn.recurrent.LSTM;
import ai.djl.nn.recurrent.RNN;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import org.junit.jupiter.api.Test;

/**
 * libtorch's own autocast on the CPU, switched on through the engine layer: operations inside
 * compute in 16 bits, parameters stay fp32 and get fp32 gradients, and the thread's state is put
 * back on every way out. Every array here is on the CPU, whatever DJL's default device, so the
 * class tests CPU autocast on any machine; CUDA's autocast is covered by {@link CudaAutocastTest}.
 */
class EngineAutocastTest {

    private static final Device CPU = Device.cpu();

    @Test
    void matrixProductsInsideComputeInBf16AndTheStateIsPutBack() {
        try (NDManager manager = NDManager.newBaseManager(Device.cpu(), "PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            LibtorchAutocast autocast = LibtorchAutocast.get();
            NDArray a = manager.ones(new Shape(4, 4));
            assertFalse(autocast.isEnabled(CPU));
            NDArray product =
                    backend.withEngineAutocast(
                            CPU,
                            Precision.BF16,
                            () -> {
                                assertTrue(autocast.isEnabled(CPU));
                                assertEquals(Precision.BF16, autocast.precision(CPU));
                                return a.matMul(a);
                            });
            assertEquals(Precision.BF16, backend.precisionOf(product));
            assertFalse(autocast.isEnabled(CPU), "autocast is off again");
            assertEquals(Precision.FP32, backend.precisionOf(a.matMul(a)));
        }
    }

    @Test
    void anExceptionInsideLeavesAutocastOff() {
        Engine.getEngine("PyTorch");
        LibtorchAutocast autocast = LibtorchAutocast.get();
        IllegalStateException thrown =
                assertThrows(
                        IllegalStateException.class,
                        () ->
                                autocast.run(
                                        CPU,
                                        Precision.BF16,
                                        () -> {
                                            throw new IllegalStateException("forward failed");
                                        }));
        assertEquals("forward failed", thrown.getMessage());
        assertFalse(autocast.isEnabled(CPU));
    }

    @Test
    void nestedUsesPutBackTheOuterState() {
        Engine.getEngine("PyTorch");
        LibtorchAutocast autocast = LibtorchAutocast.get();
        autocast.run(
                CPU,
                Precision.BF16,
                () -> {
                    autocast.run(
                            CPU,
                            Precision.FP16,
                            () -> {
                                assertEquals(Precision.FP16, autocast.precision(CPU));
                                return null;
                            });
                    assertTrue(autocast.isEnabled(CPU), "the outer autocast is still on");
                    assertEquals(Precision.BF16, autocast.precision(CPU));
                    return null;
                });
        assertFalse(autocast.isEnabled(CPU));
    }

    @Test
    void theBackendNamesTheBlocksItsAutocastRuns() {
        AmpBackend backend = AmpBackends.forEngine("PyTorch");
        assertTrue(backend.supportsEngineAutocast(lstm()));
        assertTrue(backend.supportsEngineAutocast(rnn()));
        assertFalse(backend.supportsEngineAutocast(gru()), "autocast keeps GRU in fp32");
        assertFalse(backend.supportsEngineAutocast(Linear.builder().setUnits(4).build()));
    }

    /** What libtorch 2.7.1's CPU autocast does with DJL's recurrent blocks. */
    @Test
    void autocastRunsRnnIn16BitsAndLeavesGruInFp32() {
        assertEquals(Precision.BF16, runUnderAutocast(rnn(), Precision.BF16));
        assertEquals(Precision.FP16, runUnderAutocast(rnn(), Precision.FP16));
        assertEquals(Precision.FP32, runUnderAutocast(gru(), Precision.BF16));
    }

    /**
     * Autocast computes an LSTM in 16 bits through oneDNN's LSTM ({@code mkldnn_rnn_layer} is on
     * its CPU list, {@code lstm} is not), which a CPU without bf16 instructions lacks: the engine
     * says so, recoverably (the shadow tree's stage then runs it in fp32). Where libtorch's oneDNN
     * is off (djl-amp's cure on a CPU that hides its cache topology), ATen's own LSTM runs:
     * autocast computes its gate products in bf16 while its cell state, and so its output, stay
     * fp32. That is judged by the numbers, not by the output's type.
     */
    @Test
    void lstmComputesIn16BitsOrTheEngineRefusesRecoverably() {
        Block lstm = lstm();
        Precision computed;
        double fromFp32 = 0;
        try (NDManager manager = NDManager.newBaseManager(CPU, "PyTorch")) {
            Shape input = new Shape(3, 5, 6);
            lstm.initialize(manager, DataType.FLOAT32, input);
            ParameterStore store = new ParameterStore(manager, false);
            NDArray x = manager.randomUniform(-1f, 1f, input);
            NDArray fp32 = lstm.forward(store, new NDList(x), false).head();
            try {
                NDArray out =
                        LibtorchAutocast.get()
                                .run(
                                        CPU,
                                        Precision.BF16,
                                        () -> lstm.forward(store, new NDList(x), false).head());
                computed = AmpBackends.forManager(manager).precisionOf(out);
                fromFp32 = relativeDistance(out.toType(DataType.FLOAT32, false), fp32);
            } catch (EngineException e) {
                assertTrue(e.getMessage().contains("LSTM"), e.getMessage());
                computed = null;
            }
        }
        boolean oneDnn = LibtorchOneDnn.get().isEnabled();
        System.out.printf(
                "LSTM under bf16 autocast on this CPU (libtorch's oneDNN %s): output %s, %.2e"
                        + " from fp32%n",
                oneDnn ? "on" : "off", computed, fromFp32);
        if (computed == Precision.FP32) {
            assertFalse(oneDnn, "an fp32 LSTM output under autocast where oneDNN is off only");
            assertTrue(fromFp32 > 1e-4, "bf16 gate products: " + fromFp32);
        } else {
            assertTrue(computed == null || computed == Precision.BF16, String.valueOf(computed));
        }
        assertFalse(LibtorchAutocast.get().isEnabled(CPU));
    }

    /** The largest difference of two arrays, relative to the largest magnitude of {@code want}. */
    private static double relativeDistance(NDArray got, NDArray want) {
        return got.sub(want).abs().max().getFloat() / want.abs().max().getFloat();
    }

    private static Precision runUnderAutocast(Block block, Precision precision) {
        return runUnderAutocast(CPU, block, precision);
    }

    /**
     * Runs a recurrent block forward under the engine's autocast on {@code device} and backward
     * from its output cast to fp32; asserts that its fp32 parameters got fp32 gradients.
     *
     * @return the precision of the block's output under autocast
     */
    static Precision runUnderAutocast(Device device, Block block, Precision precision) {
        try (NDManager manager = NDManager.newBaseManager(device, "PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            Shape input = new Shape(3, 5, 6);
            block.initialize(manager, DataType.FLOAT32, input);
            ParameterStore store = new ParameterStore(manager, false);
            NDArray x = manager.randomUniform(-1f, 1f, input);
            Precision computed;
            try (GradientCollector collector = Engine.getInstance().newGradientCollector()) {
                NDList out =
                        backend.withEngineAutocast(
                                device, precision, () -> block.forward(store, new NDList(x), true));
                computed = backend.precisionOf(out.head());
                NDArray fp32 =
                        backend.cast(out.head(), Precision.FP32, MemoryLayout.PRESERVE, manager);
                collector.backward(fp32.sum());
            }
            for (Pair<String, Parameter> p : block.getParameters()) {
                NDArray gradient = p.getValue().getArray().getGradient();
                assertSame(DataType.FLOAT32, p.getValue().getArray().getDataType());
                assertSame(DataType.FLOAT32, gradient.getDataType(), p.getKey());
                assertTrue(gradient.abs().sum().getFloat() > 0, p.getKey() + " got no gradient");
            }
            return computed;
        }
    }

    static Block lstm() {
        return LSTM.builder().setStateSize(8).setNumLayers(1).optBatchFirst(true).build();
    }

    static Block gru() {
        return GRU.builder().setStateSize(8).setNumLayers(1).optBatchFirst(true).build();
    }

    static Block rnn() {
        return RNN.builder()
                .setActivation(RNN.Activation.TANH)
                .setStateSize(8)
                .setNumLayers(1)
                .optBatchFirst(true)
                .build();
    }
}
