package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import io.github.djlamp.amp.cast.TunedModel;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;
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
        checked(module -> module);
    }

    /**
     * Transfer learning written as a block of the user's own (the loaded module, then a head, its
     * forward handing one to the other) is checked whole, gradients included. Its forward hands the
     * check's {@code training=false} to the module, which DJL then runs under libtorch's inference
     * mode: before, the check could not differentiate it ("Inference tensors cannot be saved for
     * backward") and the block ran in 16 bits unverified.
     */
    @Test
    void aBlockOfTheUsersOwnAroundTheModuleIsCheckedGradientsIncluded() throws Exception {
        checked(TunedModel::new);
    }

    /** The same with the module one level down, in a SequentialBlock the user's block holds. */
    @Test
    void aModuleInsideAChildOfTheUsersBlockIsCheckedToo() throws Exception {
        checked(module -> new TunedModel(new SequentialBlock().add(module)));
    }

    /**
     * Checks {@code around} the traced CNN (the module itself, or a block holding it) with the real
     * engine and with one whose autocast makes every gradient 25% large: the check runs, the wrong
     * gradients are refused, the module's weights are differentiated as it holds them, and no
     * gradient of the caller's changes.
     */
    private void checked(UnaryOperator<Block> around) throws Exception {
        KernelVerdicts.forgetAll();
        try (Model model = Model.newInstance("traced", "PyTorch");
                NDManager manager = NDManager.newBaseManager("PyTorch")) {
            model.load(fixtures(), "traced_cnn", Map.of("trainParam", "true"));
            Block module = model.getBlock();
            Shape shape = new Shape(8, 3, 16, 16);
            Block tuned = around.apply(module);
            if (tuned != module) {
                tuned.initialize(manager, DataType.FLOAT32, shape);
            }
            AmpBackend backend = AmpBackends.forManager(manager);
            NDList inputs = new NDList(manager.randomNormal(shape));
            ParameterStore masters = new ParameterStore(manager, false);
            List<float[]> before = gradients(tuned);

            KernelVerdict right =
                    new KernelVerifier(backend)
                            .stageVerdict(
                                    tuned, "tuned", inputs, masters, true, Precision.BF16, null);
            KernelVerdicts.forgetAll();
            KernelVerdict wrong =
                    new KernelVerifier(WrongUnderAutocast.gradientsTooLarge(backend))
                            .stageVerdict(
                                    tuned, "tuned", inputs, masters, true, Precision.BF16, null);
            System.out.println("right: " + right + "\nwrong gradients: " + wrong);

            assertNotEquals(
                    KernelVerdict.Outcome.NOT_CHECKED, right.getOutcome(), right.toString());
            assertEquals(KernelVerdict.Outcome.FP32_FALLBACK, wrong.getOutcome(), wrong.toString());
            assertTrue(
                    wrong.getFindings().stream().anyMatch(f -> f.contains("' gradient is")),
                    wrong.toString());
            if (right.getOutcome() != KernelVerdict.Outcome.VERIFIED) {
                System.out.println(
                        "this machine's 16-bit kernels failed the right block's check: only the"
                                + " wrong one's refusal and that the check ran are asserted");
            }
            List<float[]> after = gradients(tuned);
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
