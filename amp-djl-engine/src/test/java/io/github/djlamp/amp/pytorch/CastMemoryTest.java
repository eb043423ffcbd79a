package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import org.junit.jupiter.api.Test;

class CastMemoryTest {

    @Test
    void tenThousandCastsLeaveLiveArraysFlat() {
        try (NDManager model = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(model);
            NDArray weight = model.randomNormal(new Shape(16, 16));
            NDManager root = model.getParentManager();
            int modelBefore = model.getManagedArrays().size();
            int rootBefore = root.getManagedArrays().size();
            for (int i = 0; i < 10_000; i++) {
                try (NDManager step = model.newSubManager()) {
                    NDArray low =
                            backend.cast(
                                    weight, i % 2 == 0 ? Precision.BF16 : Precision.FP16, step);
                    backend.cast(low, Precision.FP32, step);
                }
            }
            assertEquals(modelBefore, model.getManagedArrays().size(), "arrays on the model");
            assertEquals(rootBefore, root.getManagedArrays().size(), "arrays in the engine");
        }
    }
}
