package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackends;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The generic-ops unscale route, which bf16 gradients take on every device (CUDA has no bf16
 * version of {@code _amp_foreach_non_finite_check_and_unscale_}), gives what the fused kernel
 * gives.
 */
class GenericUnscaleTest {

    private NDManager manager;
    private PtAmpBackend backend;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager("PyTorch");
        backend = (PtAmpBackend) AmpBackends.forManager(manager);
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    private NDList gradients(float bad, int where) {
        NDList grads =
                new NDList(
                        manager.create(new float[] {1024f, -512f, 3f, 0.1f}),
                        manager.create(new float[][] {{0.5f, 8f}, {-16f, 1e-3f}}),
                        manager.create(7f));
        if (where >= 0) {
            NDArray target = grads.get(where);
            if (target.getShape().dimension() == 0) {
                grads.set(where, manager.create(bad));
            } else {
                target.set(new NDIndex(0), bad);
            }
        }
        return grads;
    }

    @ParameterizedTest
    @ValueSource(floats = {1f, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN})
    void fp32GenericRouteMatchesTheKernelBitwise(float value) {
        for (int where = -1; where < 3; where++) {
            int at = Float.isFinite(value) ? -1 : where;
            NDList viaKernel = gradients(value, at);
            NDList viaGeneric = gradients(value, at);
            NDArray foundKernel = manager.zeros(new Shape(1));
            NDArray foundGeneric = manager.zeros(new Shape(1));
            NDArray inv = manager.create(new float[] {1f / 3072f});
            backend.unscaleAndCheck(viaKernel, foundKernel, inv);
            backend.unscaleAndCheckGeneric(viaGeneric, foundGeneric, inv);
            assertEquals(foundKernel.getFloat(0), foundGeneric.getFloat(0), "flag, at " + at);
            for (int i = 0; i < viaKernel.size(); i++) {
                assertArrayEquals(
                        viaKernel.get(i).toFloatArray(),
                        viaGeneric.get(i).toFloatArray(),
                        "array " + i + ", bad value at " + at);
            }
        }
    }

    @Test
    void bf16ArraysAreUnscaledAndCheckedAlongsideFp32Ones() {
        NDArray brain =
                backend.cast(manager.create(new float[] {2f, -4f, 0.75f}), Precision.BF16, manager);
        NDArray single = manager.create(new float[] {8f});
        NDArray found = manager.zeros(new Shape());
        backend.unscaleAndCheck(
                new NDList(single, brain), found, manager.create(new float[] {0.25f}));
        assertEquals(0f, backend.readFloat(found));
        assertArrayEquals(new float[] {2f}, single.toFloatArray());
        NDArray back = backend.cast(brain, Precision.FP32, manager);
        assertArrayEquals(new float[] {0.5f, -1f, 0.1875f}, back.toFloatArray());
        NDArray bad =
                backend.cast(
                        manager.create(new float[] {1f, Float.POSITIVE_INFINITY}),
                        Precision.BF16,
                        manager);
        backend.unscaleAndCheck(new NDList(bad), found, manager.create(0.5f));
        assertEquals(1f, backend.readFloat(found));
        // a later clean call leaves a raised flag raised, as the fused kernel does
        backend.unscaleAndCheck(new NDList(brain), found, manager.create(0.5f));
        assertEquals(1f, backend.readFloat(found));
        assertEquals(DataType.UNKNOWN, brain.getDataType(), "still bf16 after the in-place work");
    }
}
