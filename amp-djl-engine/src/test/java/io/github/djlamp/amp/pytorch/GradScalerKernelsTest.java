package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class GradScalerKernelsTest {

    private NDManager manager;
    private AmpBackend backend;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager("PyTorch");
        backend = AmpBackends.forManager(manager);
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    private NDList gradients() {
        return new NDList(
                manager.create(new float[] {1024f, -512f, 3f}),
                manager.create(new float[][] {{0.5f, 8f}, {-16f, 0f}}),
                manager.create(new float[] {65536f}));
    }

    @Test
    void finiteGradientsAreUnscaledExactlyAndLeaveTheFlag() {
        NDList grads = gradients();
        NDArray found = manager.zeros(new Shape(1));
        backend.unscaleAndCheck(grads, found, manager.create(new float[] {1f / 256}));
        assertEquals(0f, found.getFloat(0));
        assertArrayEquals(new float[] {4f, -2f, 3f / 256}, grads.get(0).toFloatArray());
        assertArrayEquals(
                new float[] {0.5f / 256, 8f / 256, -16f / 256, 0f}, grads.get(1).toFloatArray());
        assertArrayEquals(new float[] {256f}, grads.get(2).toFloatArray());
    }

    @ParameterizedTest
    @ValueSource(floats = {Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN})
    void anyNonFiniteValueInAnyArraySetsTheFlag(float bad) {
        for (int which = 0; which < 3; which++) {
            NDList grads = gradients();
            grads.get(which).set(new NDIndex(0), bad);
            NDArray found = manager.zeros(new Shape(1));
            backend.unscaleAndCheck(grads, found, manager.create(new float[] {0.5f}));
            assertEquals(1f, found.getFloat(0), "non-finite " + bad + " in array " + which);
        }
    }

    @Test
    void checkWorksOnReducedPrecisionArrays() {
        NDArray half = manager.create(new float[] {1f, 2f}).toType(DataType.FLOAT16, false);
        NDArray brain =
                backend.cast(manager.create(new float[] {Float.NaN}), Precision.BF16, manager);
        NDArray found = manager.zeros(new Shape(1));
        backend.unscaleAndCheck(new NDList(half), found, manager.create(new float[] {0.5f}));
        assertEquals(0f, found.getFloat(0));
        assertArrayEquals(
                new float[] {0.5f, 1f}, half.toType(DataType.FLOAT32, false).toFloatArray());
        backend.unscaleAndCheck(new NDList(brain), found, manager.create(new float[] {0.5f}));
        assertEquals(1f, found.getFloat(0));
    }

    @Test
    void zeroClearsNanAndInf() {
        NDArray a = manager.create(new float[] {Float.NaN, Float.POSITIVE_INFINITY, 3f});
        NDArray b = manager.create(new float[] {Float.NEGATIVE_INFINITY});
        backend.zero(new NDList(a, b));
        assertArrayEquals(new float[] {0f, 0f, 0f}, a.toFloatArray());
        assertArrayEquals(new float[] {0f}, b.toFloatArray());
    }

    @ParameterizedTest
    @ValueSource(floats = {0f, 1f, 2f})
    void restoreWherePutsTheSavedValuesBackOnlyOnASkip(float flag) {
        NDArray mean = manager.create(new float[] {Float.NaN, Float.POSITIVE_INFINITY, 3f});
        NDArray var = manager.create(new float[] {7f});
        NDArray savedMean = manager.create(new float[] {1f, 2f, Float.NEGATIVE_INFINITY});
        NDArray savedVar = manager.create(new float[] {Float.NaN});
        float[] meanBefore = mean.toFloatArray();
        backend.restoreWhere(
                new NDList(mean, var),
                new NDList(savedMean, savedVar),
                manager.create(new float[] {flag}));
        boolean skip = flag != 0f;
        assertArrayEquals(skip ? savedMean.toFloatArray() : meanBefore, mean.toFloatArray());
        assertEquals(skip ? Float.NaN : 7f, var.getFloat(0), "NaN and Inf copied bit for bit");
    }

    @Test
    void malformedStateIsRejected() {
        NDList grads = gradients();
        NDArray wide = manager.zeros(new Shape(2));
        NDArray inv = manager.create(new float[] {1f});
        AmpException e =
                assertThrows(AmpException.class, () -> backend.unscaleAndCheck(grads, wide, inv));
        assertEquals(true, e.getMessage().contains("foundInf"), e.getMessage());
        NDArray scale = manager.create(new float[] {1f});
        NDArray found = manager.zeros(new Shape(1));
        NDArray floatTracker = manager.zeros(new Shape(1));
        e =
                assertThrows(
                        AmpException.class,
                        () -> backend.updateScale(scale, floatTracker, found, 2, 0.5, 10));
        assertEquals(true, e.getMessage().contains("growthTracker"), e.getMessage());
    }
}
