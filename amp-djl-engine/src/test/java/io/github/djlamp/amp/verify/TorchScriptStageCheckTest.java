package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The check of a TorchScript module (DJL's transfer-learning path) compares its gradients too. DJL
 * runs a module's inference forward under libtorch's inference mode, which records nothing, so the
 * check compared the outputs only, and a module whose 16-bit gradients were 25% off passed it. It
 * also leaves the module's own gradients as they were.
 */
class TorchScriptStageCheckTest {

    @BeforeEach
    void forgetVerdicts() {
        KernelVerdicts.forgetAll();
    }

    @Test
    void aModuleWhoseGradientsAreWrongUnderAutocastIsRefused() throws Exception {
        try (Model model = Model.newInstance("traced", "PyTorch");
                NDManager manager = NDManager.newBaseManager("PyTorch")) {
            model.load(fixtures(), "traced_cnn", Map.of("trainParam", "true"));
            Block module = model.getBlock();
            AmpBackend backend = AmpBackends.forManager(manager);
            NDList inputs = new NDList(manager.randomNormal(new Shape(8, 3, 16, 16)));
            ParameterStore masters = new ParameterStore(manager, false);
            List<float[]> before = gradients(module);

            KernelVerdict right =
                    new KernelVerifier(backend)
                            .stageVerdict(
                                    module, "traced", inputs, masters, true, Precision.BF16, null);
            KernelVerdicts.forgetAll();
            KernelVerdict wrong =
                    new KernelVerifier(WrongUnderAutocast.gradientsTooLarge(backend))
                            .stageVerdict(
                                    module, "traced", inputs, masters, true, Precision.BF16, null);
            System.out.println("right: " + right + "\nwrong gradients: " + wrong);

            assertEquals(KernelVerdict.Outcome.FP32_FALLBACK, wrong.getOutcome(), wrong.toString());
            assertTrue(
                    wrong.getFindings().stream().anyMatch(f -> f.contains("' gradient is")),
                    wrong.toString());
            if (right.getOutcome() != KernelVerdict.Outcome.VERIFIED) {
                System.out.println(
                        "this machine's 16-bit kernels failed the right module's check: only the"
                                + " wrong one's refusal is asserted");
            }
            List<float[]> after = gradients(module);
            for (int i = 0; i < before.size(); i++) {
                assertArrayEquals(before.get(i), after.get(i), "the check added into a gradient");
            }
        }
    }

    private static List<float[]> gradients(Block module) {
        List<float[]> all = new ArrayList<>();
        for (Pair<String, Parameter> pair : module.getParameters()) {
            NDArray array = pair.getValue().getArray();
            all.add(array.hasGradient() ? array.getGradient().toFloatArray() : new float[0]);
        }
        return all;
    }

    private static Path fixtures() throws Exception {
        return Path.of(
                        TorchScriptStageCheckTest.class
                                .getResource("/torchscript/traced_cnn.pt")
                                .toURI())
                .getParent();
    }
}
