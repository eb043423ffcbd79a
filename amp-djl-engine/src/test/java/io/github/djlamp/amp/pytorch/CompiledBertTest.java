package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.transformer.BertPretrainingBlock;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.verify.KernelVerification;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * DJL's BERT (BertPretrainingBlock, as DJL's TrainBertOnCode and TrainBertOnGoemotions train it)
 * with its encoder stack compiled: the encoder blocks, their masked attention included, run as one
 * native call from the second forward, bitwise DJL's own fp32 step and djl-amp's eager bf16 step
 * (outputs and every gradient, dropout on).
 */
class CompiledBertTest {

    private static final String STACK = "01Bert/05transformer_0 .. 01Bert/06transformer_1";

    @Test
    void fp32CompiledEncodersAreBitwiseDjl() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            NDList inputs = padded(manager);
            BertPretrainingBlock model = BertLayerByLayerTest.initialized(manager, inputs);
            List<float[]> djl = step(model, model, inputs, manager);
            MixedPrecisionBlock wrapped = Amp.wrap(model, "float32").compileForward(true);
            assertSame(djl, compiledStep(wrapped, model, inputs, manager));
        }
    }

    @Test
    void bf16CompiledEncodersAreTheEagerBf16Wrapper() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            NDList inputs = padded(manager);
            BertPretrainingBlock model = BertLayerByLayerTest.initialized(manager, inputs);
            List<float[]> eager =
                    step(
                            Amp.wrap(model, "mixed_bfloat16", KernelVerification.OFF)
                                    .compileForward(false),
                            model,
                            inputs,
                            manager);
            MixedPrecisionBlock wrapped =
                    Amp.wrap(model, "mixed_bfloat16", KernelVerification.OFF).compileForward(true);
            assertSame(eager, compiledStep(wrapped, model, inputs, manager));
        }
    }

    /** The second sequence padded after 5 tokens, so that the mask changes the scores. */
    private static NDList padded(NDManager manager) {
        NDList inputs = BertLayerByLayerTest.inputs(manager);
        int[] mask = new int[16];
        Arrays.fill(mask, 0, 13, 1);
        inputs.set(2, manager.create(mask, inputs.get(2).getShape()));
        return inputs;
    }

    /** One training step, the running statistics it moved put back. */
    private static List<float[]> step(Block block, Block model, NDList inputs, NDManager manager) {
        return keepingStatistics(
                model, () -> BertLayerByLayerTest.train(block, model, inputs, manager));
    }

    /** The second step of a wrapper: the first runs eagerly, the second compiled. */
    private static List<float[]> compiledStep(
            MixedPrecisionBlock wrapped, Block model, NDList inputs, NDManager manager) {
        step(wrapped, model, inputs, manager);
        assertTrue(wrapped.compiledRuns(manager.getDevice()).isEmpty(), "the first runs eagerly");
        List<float[]> compiled = step(wrapped, model, inputs, manager);
        assertEquals(
                List.of(STACK),
                wrapped.compiledRuns(manager.getDevice()),
                () -> String.valueOf(wrapped.compiledForwardRefusal(manager.getDevice())));
        assertEquals(
                "01Bert: its embeddings, attention mask and pooling, around its compiled encoder"
                        + " blocks",
                wrapped.compiledForwardRefusal(manager.getDevice()));
        return compiled;
    }

    private static List<float[]> keepingStatistics(Block model, Supplier<List<float[]>> step) {
        List<NDArray> statistics = new ArrayList<>();
        List<NDArray> before = new ArrayList<>();
        for (Pair<String, Parameter> p : model.getParameters()) {
            if (!p.getValue().requiresGradient()) {
                statistics.add(p.getValue().getArray());
                before.add(p.getValue().getArray().duplicate());
            }
        }
        List<float[]> result = step.get();
        for (int i = 0; i < statistics.size(); i++) {
            before.get(i).copyTo(statistics.get(i));
            before.get(i).close();
        }
        return result;
    }

    private static void assertSame(List<float[]> expected, List<float[]> actual) {
        assertEquals(expected.size(), actual.size());
        for (int i = 0; i < expected.size(); i++) {
            assertArrayEquals(expected.get(i), actual.get(i), 0f, "array " + i);
        }
    }
}
