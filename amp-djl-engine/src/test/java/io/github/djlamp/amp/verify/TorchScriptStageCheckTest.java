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
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
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

    /**
     * Transfer learning written as a block of the user's own (the loaded module, then a head, its
     * forward handing one to the other) is checked whole, gradients included. Its forward hands the
     * check's {@code training=false} to the module, which DJL then runs under libtorch's inference
     * mode: before, the check could not differentiate it ("Inference tensors cannot be saved for
     * backward") and the block ran in 16 bits unverified.
     */
    @Test
    void aBlockOfTheUsersOwnAroundTheModuleIsCheckedGradientsIncluded() throws Exception {
        checkedAround(module -> module);
    }

    /** The same with the module one level down, in a SequentialBlock the user's block holds. */
    @Test
    void aModuleInsideAChildOfTheUsersBlockIsCheckedToo() throws Exception {
        checkedAround(module -> new SequentialBlock().add(module));
    }

    private void checkedAround(UnaryOperator<Block> backbone) throws Exception {
        KernelVerdicts.forgetAll();
        try (Model model = Model.newInstance("traced", "PyTorch");
                NDManager manager = NDManager.newBaseManager("PyTorch")) {
            model.load(fixtures(), "traced_cnn", Map.of("trainParam", "true"));
            Block module = model.getBlock();
            Shape shape = new Shape(8, 3, 16, 16);
            Block tuned = new TunedModel(backbone.apply(module));
            tuned.initialize(manager, DataType.FLOAT32, shape);
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

    /** The loaded module, then a new Linear head, as a block of the user's own. */
    static final class TunedModel extends AbstractBlock {
        private final Block backbone;
        private final Block head;

        TunedModel(Block backbone) {
            this.backbone = addChildBlock("backbone", backbone);
            this.head = addChildBlock("head", Linear.builder().setUnits(3).build());
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            return head.forward(store, backbone.forward(store, inputs, training), training);
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            backbone.initialize(manager, dataType, inputShapes);
            head.initialize(manager, dataType, backbone.getOutputShapes(inputShapes));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return head.getOutputShapes(backbone.getOutputShapes(inputShapes));
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
