package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Parameter;
import ai.djl.training.GradientCollector;
import io.github.djlamp.amp.cast.internal.WeightCastCache;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import org.junit.jupiter.api.Test;

/**
 * A weight cast made while autograd does not record (a training-mode forward with no gradient
 * collector open) is no node of a graph: a recording forward of the same step gets a cast of its
 * own, through which the gradient reaches the master (issue 44 item 2). A recorded cast still
 * serves a later forward that does not record.
 */
class WeightCastCacheRecordingTest {

    @Test
    void aCastMadeWithoutRecordingDoesNotServeARecordingForward() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            WeightCastCache cache = new WeightCastCache(backend);
            Parameter parameter =
                    Parameter.builder().setName("weight").setType(Parameter.Type.WEIGHT).build();
            NDArray master = manager.create(new float[] {0.5f, -1.25f, 2f});
            master.setRequiresGradient(true);
            try (NDManager step = manager.newSubManager()) {
                NDArray looked = castWithoutRecording(cache, parameter, master, step, backend);
                NDArray recorded;
                try (GradientCollector collector = manager.getEngine().newGradientCollector()) {
                    recorded = get(cache, parameter, master, step);
                    // identity, not assertNotSame: its message would print a bf16 array, which DJL
                    // cannot
                    assertTrue(looked != recorded, "a cast of its own for the recording forward");
                    NDArray back =
                            backend.cast(recorded, Precision.FP32, MemoryLayout.CONTIGUOUS, step);
                    collector.backward(back.mul(3f).sum());
                }
                try (NDArray gradient = master.getGradient()) {
                    assertArrayEquals(
                            new float[] {3f, 3f, 3f},
                            gradient.toFloatArray(),
                            "the gradient reached the master through the cast");
                }
                assertTrue(
                        recorded == castWithoutRecording(cache, parameter, master, step, backend),
                        "the recorded cast serves a forward that does not record");
            }
        }
    }

    private static NDArray castWithoutRecording(
            WeightCastCache cache,
            Parameter parameter,
            NDArray master,
            NDManager step,
            AmpBackend backend) {
        boolean before = backend.setRecording(false);
        try {
            return get(cache, parameter, master, step);
        } finally {
            backend.setRecording(before);
        }
    }

    private static NDArray get(
            WeightCastCache cache, Parameter parameter, NDArray master, NDManager step) {
        return cache.get(parameter, master, Precision.BF16, MemoryLayout.CONTIGUOUS, step);
    }
}
