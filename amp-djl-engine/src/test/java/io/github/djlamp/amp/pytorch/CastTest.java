package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class CastTest {

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

    private float[] roundTrip(float[] values, Precision via) {
        NDArray x = manager.create(values);
        NDArray low = backend.cast(x, via, manager);
        assertEquals(via, backend.precisionOf(low));
        return backend.cast(low, Precision.FP32, manager).toFloatArray();
    }

    @Test
    void backendIsFoundOncePerEngine() {
        assertSame(backend, AmpBackends.forEngine("PyTorch"));
        assertTrue(backend instanceof PtAmpBackend);
    }

    @Test
    void unknownEngineNamesTheMissingDependency() {
        AmpException e = assertThrows(AmpException.class, () -> AmpBackends.forEngine("MXNet"));
        assertTrue(e.getMessage().contains("io.github.djlamp:amp-djl-engine"), e.getMessage());
    }

    @Test
    void representableValuesRoundTripExactly() {
        float[] values = {0f, -0f, 1f, -2.5f, 0.125f, 1024f, -65504f, 3.0517578e-5f, 5.9604645e-8f};
        assertArrayEquals(values, roundTrip(values, Precision.FP16));
        float[] bf16 = {0f, 1f, -3f, 0.5f, 1.0078125f, 3.3895314e38f, -1.1754944e-38f};
        assertArrayEquals(bf16, roundTrip(bf16, Precision.BF16));
    }

    @Test
    void bfloat16RoundsToNearestEven() {
        float[] in = {1.00390625f, 1.01171875f, 1.005859375f, -1.00390625f};
        float[] expected = {1.0f, 1.015625f, 1.0078125f, -1.0f};
        assertArrayEquals(expected, roundTrip(in, Precision.BF16));
    }

    @Test
    void float16RoundsToNearestEvenAndOverflows() {
        float[] in = {1.00048828125f, 65519f, 65520f, -70000f, 2.9802322e-8f, 1e-9f};
        float[] expected = {1.0f, 65504f, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 0f, 0f};
        assertArrayEquals(expected, roundTrip(in, Precision.FP16));
    }

    @Test
    void randomValuesMatchIeeeReference() {
        Random random = new Random(42);
        float[] values = new float[10_000];
        for (int i = 0; i < values.length; i++) {
            int exponent = random.nextInt(60) - 30;
            values[i] = (float) ((random.nextDouble() * 2 - 1) * Math.pow(2, exponent));
        }
        float[] half = roundTrip(values, Precision.FP16);
        float[] brain = roundTrip(values, Precision.BF16);
        for (int i = 0; i < values.length; i++) {
            assertEquals(Fp16Reference.roundToHalf(values[i]), half[i], "fp16 of " + values[i]);
            assertEquals(
                    Fp16Reference.roundToBfloat16(values[i]), brain[i], "bf16 of " + values[i]);
        }
    }

    @Test
    void specialValuesSurvive() {
        float[] in = {Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN};
        for (Precision p : new Precision[] {Precision.FP16, Precision.BF16}) {
            float[] out = roundTrip(in, p);
            assertEquals(Float.POSITIVE_INFINITY, out[0]);
            assertEquals(Float.NEGATIVE_INFINITY, out[1]);
            assertTrue(Float.isNaN(out[2]));
        }
    }

    @Test
    void dtypeQueryKnowsBfloat16() {
        NDArray x = manager.ones(new Shape(2, 2));
        assertEquals(Precision.FP32, backend.precisionOf(x));
        assertEquals(Precision.FP16, backend.precisionOf(x.toType(DataType.FLOAT16, false)));
        NDArray bf16 = backend.cast(x, Precision.BF16, manager);
        assertEquals(DataType.UNKNOWN, bf16.getDataType(), "DJL cannot name bf16");
        assertEquals(Precision.BF16, backend.precisionOf(bf16));
        assertNull(backend.precisionOf(manager.create(new int[] {1, 2})));
    }

    @Test
    void castKeepsShapeAndLandsOnTheResultManager() {
        NDArray x = manager.ones(new Shape(3, 4, 5));
        try (NDManager step = manager.newSubManager()) {
            NDArray y = backend.cast(x, Precision.BF16, step);
            assertEquals(x.getShape(), y.getShape());
            assertSame(step, y.getManager());
            assertNotSame(x, y);
        }
    }

    @Test
    void castToTheSamePrecisionKeepsValues() {
        NDArray x = manager.create(new float[] {1.1f, 2.2f});
        assertArrayEquals(
                x.toFloatArray(), backend.cast(x, Precision.FP32, manager).toFloatArray());
    }

    @Test
    void nonFloatingInputIsRejectedWithAMessage() {
        NDArray ints = manager.create(new int[] {1, 2, 3});
        AmpException e =
                assertThrows(AmpException.class, () -> backend.cast(ints, Precision.BF16, manager));
        assertTrue(e.getMessage().contains("floating-point arrays only"), e.getMessage());
    }
}
