package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.verify.CacheTopology;
import java.lang.reflect.Method;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The engine's reference pass: on a CPU that hides its cache topology (taken for one here through
 * {@link CacheTopology#TEST_PROPERTY}) it runs with libtorch's switch for oneDNN off and puts it
 * back after, also when passes overlap; elsewhere it leaves oneDNN on. A convolution run without
 * oneDNN is libtorch's own kernel: its output differs from oneDNN's by rounding only.
 */
class LibtorchOneDnnTest {

    @AfterEach
    void clear() {
        System.clearProperty(CacheTopology.TEST_PROPERTY);
    }

    @Test
    void whereCachesAreHiddenTheReferencePassRunsWithoutOneDnn() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            LibtorchOneDnn oneDnn = LibtorchOneDnn.get();
            // on by default; off where Amp.configure met a hidden cache topology (HiddenCacheCure)
            boolean before = oneDnn.isEnabled();
            System.setProperty(CacheTopology.TEST_PROPERTY, "visible");
            assertEquals(before, backend.referencePass(Device.cpu(), oneDnn::isEnabled));
            System.setProperty(CacheTopology.TEST_PROPERTY, "hidden");
            assertFalse(backend.referencePass(Device.cpu(), oneDnn::isEnabled));
            boolean nested =
                    backend.referencePass(
                            Device.cpu(),
                            () ->
                                    backend.referencePass(Device.cpu(), () -> 0) == 0
                                            && oneDnn.isEnabled());
            assertFalse(nested, "an inner pass does not switch oneDNN back on");
            assertEquals(before, oneDnn.isEnabled(), "put back after the pass");
        }
    }

    /**
     * The kept verdicts' key and {@code auto} read the process's setting, not a reference pass's
     * moment without oneDNN; and the cure of a hidden cache topology, met during a pass, outlasts
     * it (the pass does not put back oneDNN).
     */
    @Test
    void theKeyReadsTheProcesssSettingAndTheCureOutlastsAPass() throws Exception {
        PtAmpBackend backend = new PtAmpBackend();
        LibtorchOneDnn oneDnn = LibtorchOneDnn.get();
        boolean before = oneDnn.isEnabled();
        String key = backend.kernelEnvironment();
        assertTrue(key.endsWith(before ? ", oneDNN on" : ", oneDNN off"), key);
        System.setProperty(CacheTopology.TEST_PROPERTY, "hidden");
        assertEquals(key, backend.referencePass(Device.cpu(), backend::kernelEnvironment));
        assertEquals(before, backend.referencePass(Device.cpu(), LibtorchOneDnn::usedByTraining));
        Method set = LibtorchOneDnn.class.getDeclaredMethod("set", boolean.class);
        set.setAccessible(true);
        try {
            assertFalse(backend.referencePass(Device.cpu(), oneDnn::disableForProcess));
            assertFalse(oneDnn.isEnabled(), "still off after the pass");
            assertFalse(LibtorchOneDnn.usedByTraining());
            assertTrue(backend.kernelEnvironment().endsWith(", oneDNN off"));
        } finally {
            set.invoke(oneDnn, before);
        }
    }

    @Test
    void aConvolutionWithoutOneDnnComputesTheSameUpToRounding() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(3);
            Block conv =
                    Conv2d.builder()
                            .setFilters(8)
                            .setKernelShape(new Shape(3, 3))
                            .optPadding(new Shape(1, 1))
                            .build();
            Shape shape = new Shape(4, 4, 10, 10);
            conv.initialize(manager, DataType.FLOAT32, shape);
            NDArray x = manager.randomNormal(shape);
            ParameterStore store = new ParameterStore(manager, false);
            float[] withOneDnn = conv.forward(store, new NDList(x), false).head().toFloatArray();
            System.setProperty(CacheTopology.TEST_PROPERTY, "hidden");
            float[] without =
                    AmpBackends.forManager(manager)
                            .referencePass(
                                    Device.cpu(),
                                    () ->
                                            conv.forward(store, new NDList(x), false)
                                                    .head()
                                                    .toFloatArray());
            assertArrayEquals(withOneDnn, without, 1e-4f);
        }
    }
}
