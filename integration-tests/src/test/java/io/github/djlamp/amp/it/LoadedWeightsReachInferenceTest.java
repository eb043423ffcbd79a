package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.inference.Predictor;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.translate.NoopTranslator;
import io.github.djlamp.amp.Amp;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * After new weights are loaded into a wrapped block ({@code Block.loadParameters}, {@code
 * Model.load}), inference uses them, even when its inputs live on the same long-lived manager as
 * before, as in "for each checkpoint: model.load(...); predictor.predict(inputs made once)".
 *
 * <p>Regression test: before main's c4c9b0e, {@code WeightCastCache} reused a 16-bit cast while it
 * was alive on the input's manager and only the optimizer invalidated it, so after a load the
 * wrapped model kept predicting with the casts of the OLD weights (output unchanged by the load).
 */
class LoadedWeightsReachInferenceTest {

    private static final Shape INPUT = new Shape(4, 1, 28, 28);

    @TempDir Path dir;

    @Test
    void predictionAfterLoadParametersUsesTheLoadedWeights() throws Exception {
        try (Model wrapped = Model.newInstance("wrapped", "PyTorch");
                Model other = Model.newInstance("other", "PyTorch");
                NDManager inputs = NDManager.newBaseManager("PyTorch")) {
            initialize(wrapped, Amp.wrap(Models.smallCnn(), "mixed_bfloat16"), 1);
            initialize(other, Models.smallCnn(), 2);
            NDArray x = inputs.randomNormal(INPUT);
            NDArray before = predict(wrapped, x);

            wrapped.getBlock()
                    .loadParameters(
                            wrapped.getNDManager(),
                            new DataInputStream(new ByteArrayInputStream(bytes(other.getBlock()))));

            assertUsesNewWeights(before, predict(wrapped, x), predict(other, x));
        }
    }

    @Test
    void predictionAfterModelLoadUsesTheCheckpoint() throws Exception {
        try (Model wrapped = Model.newInstance("wrapped", "PyTorch");
                Model other = Model.newInstance("checkpoint", "PyTorch");
                NDManager inputs = NDManager.newBaseManager("PyTorch")) {
            initialize(wrapped, Amp.wrap(Models.smallCnn(), "mixed_bfloat16"), 1);
            initialize(other, Models.smallCnn(), 2);
            other.save(dir, "checkpoint");
            NDArray x = inputs.randomNormal(INPUT);
            NDArray before = predict(wrapped, x);

            wrapped.load(dir, "checkpoint");

            assertUsesNewWeights(before, predict(wrapped, x), predict(other, x));
        }
    }

    private static void assertUsesNewWeights(NDArray before, NDArray after, NDArray expected) {
        float range = expected.abs().max().getFloat();
        float error = after.sub(expected).abs().max().getFloat();
        float changed = after.sub(before).abs().max().getFloat();
        System.out.printf(
                "after loading: max |wrapped bf16 - plain fp32| = %.4f (logits up to %.4f); the"
                        + " wrapped output changed by %.4f%n",
                error, range, changed);
        assertTrue(
                error <= 0.02f * range,
                "the wrapped model must predict with the loaded weights (bf16 tolerance 2% of "
                        + range
                        + "), but differs by "
                        + error
                        + " and changed by only "
                        + changed
                        + " since before the load: stale 16-bit weight casts?");
    }

    private static void initialize(Model model, Block block, int seed) {
        Engine.getInstance().setRandomSeed(seed);
        model.setBlock(block);
        block.initialize(model.getNDManager(), DataType.FLOAT32, INPUT);
    }

    private static NDArray predict(Model model, NDArray x) throws Exception {
        try (Predictor<NDList, NDList> p = model.newPredictor(new NoopTranslator())) {
            return p.predict(new NDList(x)).singletonOrThrow();
        }
    }

    private static byte[] bytes(Block block) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (DataOutputStream os = new DataOutputStream(out)) {
            block.saveParameters(os);
        }
        return out.toByteArray();
    }
}
