package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.engine.Engine;
import ai.djl.pytorch.engine.PtEngine;
import io.github.djlamp.amp.internal.DjlSeam;
import org.junit.jupiter.api.Test;

/** The PyTorch engine and its natives on the class path are those the build chose. */
class EngineVersionTest {

    @Test
    void thePyTorchEngineIsOfTheSameDjlVersionAsDjlsApi() {
        String engine = PtEngine.class.getPackage().getSpecificationVersion();
        String pytorch = Engine.getEngine("PyTorch").getVersion();
        System.out.println(
                "djl-amp: these tests run on DJL "
                        + DjlSeam.djlVersion()
                        + ", pytorch-engine "
                        + engine
                        + ", PyTorch "
                        + pytorch);
        assertEquals(DjlSeam.djlVersion(), engine);
        String expected = System.getProperty("djlamp.test.djlVersion");
        if (expected != null) {
            assertEquals(expected, engine);
        }
        assertEquals(DjlSeam.TESTED_PYTORCH_VERSION, pytorch);
    }
}
