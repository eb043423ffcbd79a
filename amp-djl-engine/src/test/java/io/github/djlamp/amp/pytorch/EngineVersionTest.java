package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.engine.Engine;
import ai.djl.pytorch.engine.PtEngine;
import ai.djl.util.Utils;
import io.github.djlamp.amp.internal.DjlSeam;
import org.junit.jupiter.api.Test;

/**
 * The PyTorch engine and its natives are those the build chose, or the libtorch the environment
 * chose on purpose ({@code PYTORCH_VERSION}, read as DJL reads it: the environment, then the system
 * properties).
 */
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
        // DJL loads another libtorch when PYTORCH_VERSION names one, in the environment or as a
        // system property (a GPU machine's own torch): then that one, else the build's
        String chosen = Utils.getEnvOrSystemProperty("PYTORCH_VERSION");
        assertEquals(
                chosen == null || chosen.isBlank() ? DjlSeam.TESTED_PYTORCH_VERSION : chosen.trim(),
                pytorch,
                "PYTORCH_VERSION=" + chosen);
    }
}
