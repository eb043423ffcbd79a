package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.MalformedModelException;
import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.recurrent.LSTM;
import ai.djl.nn.recurrent.RNN;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.translate.Batchifier;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.strategy.AutocastStage;
import io.github.djlamp.amp.policy.BlockPlan;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Fine-tuning a traced TorchScript model with a DJL head, as DJL's transfer-learning examples do,
 * with the two lines ({@code Amp.wrap}, {@code Amp.configure}): the module runs under libtorch's
 * own autocast, its fp32 parameters get fp32 gradients, the loss follows fp32's, and the trained
 * model loads in plain DJL. The fixtures are made by {@code torchscript/make_fixtures.py}.
 */
class EngineAutocastTrainingTest {

    private static final int STEPS = 12;
    private static final String PT_SYMBOL_BLOCK = PtSymbolBlock.class.getName();

    @TempDir Path saved;

    /** One fine-tuning run: the losses, and the model trained (closed by the caller). */
    private record Run(
            List<Float> losses, Model model, Block plain, AutocastStage stage, long nanos) {}

    private static Path fixtures() throws URISyntaxException {
        return Path.of(
                        EngineAutocastTrainingTest.class
                                .getResource("/torchscript/traced_cnn.pt")
                                .toURI())
                .getParent();
    }

    @Test
    void aTracedCnnFineTunesInBf16WithinTheFp32Loss() throws Exception {
        fineTunesLikeFp32("traced_cnn", new Shape(8, 3, 16, 16));
    }

    @Test
    void aTracedTransformerEncoderFineTunesInBf16WithinTheFp32Loss() throws Exception {
        fineTunesLikeFp32("traced_encoder", new Shape(8, 8, 16));
    }

    private void fineTunesLikeFp32(String fixture, Shape input) throws Exception {
        Run fp32 = fineTune(fixture, input, null);
        Run bf16 = fineTune(fixture, input, "mixed_bfloat16");
        try {
            assertNotNull(bf16.stage.lastComputedPrecision(), "ran under autocast");
            assertNull(bf16.stage.fallbackReason());
            double difference = differenceFromFp32(fp32.model.getBlock(), input, "mixed_bfloat16");
            System.out.printf(
                    "%s: module alone, bf16 vs fp32: %.2e relative%n", fixture, difference);
            assertTrue(difference > 1e-4 && difference < 5e-2, "bf16 rounding: " + difference);
            float first = fp32.losses.get(0);
            float last32 = fp32.losses.get(STEPS - 1);
            float last16 = bf16.losses.get(STEPS - 1);
            System.out.printf(
                    "%s: loss fp32 %.5f -> %.5f, bf16 autocast %.5f -> %.5f; %d steps (with a"
                            + " loss evaluation each) %d ms fp32, %d ms bf16%n",
                    fixture,
                    first,
                    last32,
                    bf16.losses.get(0),
                    last16,
                    STEPS,
                    fp32.nanos / 1_000_000,
                    bf16.nanos / 1_000_000);
            assertTrue(last32 < first, "the fp32 run learns: " + fp32.losses);
            assertEquals(first, bf16.losses.get(0), 0.02 * first, "first loss");
            assertEquals(last32, last16, 0.01 * last32, "loss after " + STEPS + " steps");
            assertReloadsInPlainDjl(fixture, input, bf16);
        } finally {
            fp32.model.close();
            bf16.model.close();
        }
    }

    /**
     * Runs the loaded module alone (the first child of the model), wrapped under {@code policy} and
     * plain, on the same input, and returns their largest difference relative to the largest fp32
     * output: 0 when the module computed in fp32, bf16 rounding when it computed in bf16.
     */
    private static double differenceFromFp32(Block model, Shape input, String policy) {
        return moduleDifferenceFromFp32(model.getChildren().get(0).getValue(), input, policy);
    }

    /**
     * The largest difference of {@code module}'s inference output under {@code policy} from its
     * fp32 output, relative to the largest fp32 magnitude.
     */
    private static double moduleDifferenceFromFp32(Block module, Shape input, String policy) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            NDArray x = manager.randomNormal(input);
            ParameterStore store = new ParameterStore(manager, false);
            float[] fp32 = module.forward(store, new NDList(x), false).head().toFloatArray();
            MixedPrecisionBlock wrapped = Amp.wrap(module, policy);
            float[] low = wrapped.forward(store, new NDList(x), false).head().toFloatArray();
            double largest = 0;
            double difference = 0;
            for (int i = 0; i < fp32.length; i++) {
                largest = Math.max(largest, Math.abs(fp32[i]));
                difference = Math.max(difference, Math.abs(fp32[i] - low[i]));
            }
            return difference / largest;
        }
    }

    /** The trained model, saved through the wrapper, loads in plain DJL and predicts the same. */
    private void assertReloadsInPlainDjl(String fixture, Shape input, Run trained)
            throws IOException, MalformedModelException, URISyntaxException {
        trained.model.save(saved, "tuned");
        try (Model plain = loadTraced(fixture);
                NDManager manager = NDManager.newBaseManager("PyTorch")) {
            plain.setBlock(withHead(plain.getBlock()));
            plain.load(saved, "tuned");
            Engine.getInstance().setRandomSeed(11);
            NDArray x = manager.randomNormal(input);
            NDArray expected =
                    trained.plain
                            .forward(new ParameterStore(manager, false), new NDList(x), false)
                            .head();
            NDArray actual =
                    plain.getBlock()
                            .forward(new ParameterStore(manager, false), new NDList(x), false)
                            .head();
            // bitwise on the CPU; on a GPU libtorch's graph executor runs a module it has profiled
            // (the trained one) through fused kernels that round differently from a fresh one's
            float[] want = expected.toFloatArray();
            float tolerance = 0f;
            if (x.getDevice().isGpu()) {
                for (float v : want) {
                    tolerance = Math.max(tolerance, 1e-5f * Math.abs(v));
                }
            }
            assertArrayEquals(want, actual.toFloatArray(), tolerance);
        }
    }

    /** The same, ending in softmax: its code may not see a bf16 array. */
    static final class TunedSoftmaxModel extends AbstractBlock {
        private final Block backbone;

        TunedSoftmaxModel(Block backbone) {
            this.backbone = addChildBlock("backbone", backbone);
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            return new NDList(backbone.forward(store, inputs, training).head().softmax(1));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return backbone.getOutputShapes(inputShapes);
        }
    }

    @Test
    void aBlockOfTheUsersOwnAroundTheModuleRunsUnderAutocastOnItsReadCode() throws Exception {
        Shape input = new Shape(8, 3, 16, 16);
        Model plain = loadTraced("traced_cnn");
        Run fp32 = train(plain, new TunedModel(plain.getBlock()), null, input);
        Model tuned = loadTraced("traced_cnn");
        Run bf16 = train(tuned, new TunedModel(tuned.getBlock()), "mixed_bfloat16", input);
        try {
            assertNotNull(bf16.stage, "the engine's autocast runs the user's block");
            assertEquals(Precision.BF16, bf16.stage.lastComputedPrecision());
            assertNull(bf16.stage.fallbackReason());
            float last32 = fp32.losses.get(STEPS - 1);
            float last16 = bf16.losses.get(STEPS - 1);
            System.out.printf(
                    "user block around traced_cnn: loss fp32 %.5f, bf16 autocast %.5f%n",
                    last32, last16);
            assertTrue(last32 < fp32.losses.get(0), "the fp32 run learns: " + fp32.losses);
            assertEquals(last32, last16, 0.01 * last32, "loss after " + STEPS + " steps");
        } finally {
            fp32.model.close();
            bf16.model.close();
        }
        try (Model other = loadTraced("traced_cnn")) {
            AmpBackend backend;
            try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
                backend = AmpBackends.forManager(manager);
            }
            ModelPlan plan =
                    ModelPlan.of(
                            PrecisionPolicy.parse("mixed_bfloat16"),
                            new TunedSoftmaxModel(other.getBlock()),
                            backend::supportsEngineAutocast);
            assertEquals(
                    BlockPlan.Strategy.STAGE,
                    plan.get("").getStrategy(),
                    "softmax in its own code: whole in fp32, never under autocast");
            assertEquals(CastCategory.FP32, plan.get("").getCategory());
        }
    }

    /**
     * The report: following the old WARN's advice ({@code class:...PtSymbolBlock=trusted})
     * ended in "Input type (CPUBFloat16Type) and weight type (CPUFloatType) should be the same".
     */
    @Test
    void vouchingForTheModuleRunsItUnderAutocastInsteadOfFailing() throws Exception {
        Run run =
                fineTune(
                        "traced_cnn",
                        new Shape(8, 3, 16, 16),
                        "mixed_bfloat16[class:" + PT_SYMBOL_BLOCK + "=trusted]");
        try {
            assertEquals(
                    Precision.BF16, run.stage.lastComputedPrecision(), "the CNN's last Linear");
            assertTrue(Float.isFinite(run.losses.get(STEPS - 1)));
        } finally {
            run.model.close();
        }
    }

    @Test
    void anFp32OverrideKeepsTheModuleOutOfAutocast() throws Exception {
        Run run =
                fineTune(
                        "traced_cnn",
                        new Shape(8, 3, 16, 16),
                        "mixed_bfloat16[class:" + PT_SYMBOL_BLOCK + "=fp32]");
        try {
            assertNull(run.stage, "no autocast stage");
            double difference =
                    differenceFromFp32(
                            run.model.getBlock(),
                            new Shape(8, 3, 16, 16),
                            "mixed_bfloat16[class:" + PT_SYMBOL_BLOCK + "=fp32]");
            assertEquals(0.0, difference, "the module computes in fp32");
        } finally {
            run.model.close();
        }
    }

    @Test
    void aForwardThatFailsLeavesAutocastOff() throws Exception {
        try (Model model = loadTraced("traced_cnn");
                NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block block = withHead(model.getBlock());
            MixedPrecisionBlock wrapped = Amp.wrap(block, "mixed_bfloat16");
            model.setBlock(wrapped);
            wrapped.initialize(manager, DataType.FLOAT32, new Shape(2, 3, 16, 16));
            NDArray wrongChannels = manager.randomNormal(new Shape(2, 5, 16, 16));
            try (Trainer trainer = model.newTrainer(config(wrapped))) {
                RuntimeException e =
                        assertThrows(
                                RuntimeException.class,
                                () -> trainer.forward(new NDList(wrongChannels)));
                assertTrue(e.getMessage().contains("channels"), e.getMessage());
            }
            AmpBackend backend = AmpBackends.forManager(manager);
            NDArray a = manager.ones(new Shape(4, 4));
            assertSame(Precision.FP32, backend.precisionOf(a.matMul(a)), "autocast is off");
        }
    }

    /** DJL's MNIST-with-LSTM example's model, tiny: reshape, LSTM, flatten, Linear. */
    @Test
    void theLstmOfDjlsMnistExampleRunsUnderAutocastOrSaysWhyItStaysFp32() throws Exception {
        for (String kind : List.of("lstm", "rnn")) {
            try (Model model = Model.newInstance(kind, "PyTorch")) {
                Block recurrent =
                        "lstm".equals(kind)
                                ? LSTM.builder().setStateSize(16).setNumLayers(1).build()
                                : RNN.builder()
                                        .setActivation(RNN.Activation.TANH)
                                        .setStateSize(16)
                                        .setNumLayers(1)
                                        .build();
                SequentialBlock block = mnistExampleModel(recurrent);
                Run run = train(model, block, "mixed_bfloat16", new Shape(8, 1, 7, 4));
                assertNotNull(run.stage, kind);
                String fallback = run.stage.fallbackReason();
                System.out.println(
                        kind
                                + ": computed in "
                                + run.stage.lastComputedPrecision()
                                + ", fallback "
                                + fallback
                                + ", losses "
                                + run.losses);
                if (run.stage.lastComputedPrecision() == Precision.FP32 && fallback == null) {
                    // ATen's own LSTM where libtorch's oneDNN is off: autocast computes its gate
                    // products in bf16, its cell state and output stay fp32
                    double difference =
                            moduleDifferenceFromFp32(
                                    block.getChildren().get(1).getValue(),
                                    new Shape(8, 7, 4),
                                    "mixed_bfloat16");
                    System.out.printf("%s alone, bf16 vs fp32: %.2e relative%n", kind, difference);
                    assertTrue(difference > 1e-4, "16-bit products inside: " + difference);
                } else {
                    assertTrue(
                            run.stage.lastComputedPrecision() == Precision.BF16 || fallback != null,
                            "16 bits, or fp32 with the engine's reason");
                }
                assertTrue(Float.isFinite(run.losses.get(STEPS - 1)));
            }
        }
    }

    private static Model loadTraced(String fixture)
            throws IOException, MalformedModelException, URISyntaxException {
        Model model = Model.newInstance(fixture, "PyTorch");
        model.load(fixtures(), fixture, Map.of("trainParam", "true"));
        return model;
    }

    /** DJL's transfer-learning shape: the loaded module, then a new Linear head of 3 classes. */
    private static SequentialBlock withHead(Block module) {
        return new SequentialBlock().add(module).add(Linear.builder().setUnits(3).build());
    }

    private Run fineTune(String fixture, Shape input, String policy) throws Exception {
        Model model = loadTraced(fixture);
        return train(model, withHead(model.getBlock()), policy, input);
    }

    private static DefaultTrainingConfig baseConfig() {
        return new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                .optOptimizer(Optimizer.sgd().setLearningRateTracker(Tracker.fixed(0.05f)).build());
    }

    private static ai.djl.training.TrainingConfig config(MixedPrecisionBlock wrapped) {
        return Amp.configure(baseConfig(), wrapped);
    }

    /** Trains {@code block} (wrapped under {@code policy}, or plain for null) on fixed data. */
    private static Run train(Model model, Block block, String policy, Shape input) {
        Engine.getInstance().setRandomSeed(7);
        MixedPrecisionBlock wrapped = policy == null ? null : Amp.wrap(block, policy);
        model.setBlock(wrapped == null ? block : wrapped);
        List<Float> losses = new ArrayList<>();
        AutocastStage stage = null;
        long nanos;
        try (NDManager data = NDManager.newBaseManager("PyTorch");
                Trainer trainer =
                        model.newTrainer(wrapped == null ? baseConfig() : config(wrapped))) {
            trainer.initialize(input);
            NDArray x = data.randomNormal(input);
            NDArray y =
                    data.randomInteger(0, 3, new Shape(input.get(0)), DataType.INT32)
                            .toType(DataType.FLOAT32, false);
            long started = System.nanoTime();
            for (int step = 0; step < STEPS; step++) {
                NDManager stepManager = data.newSubManager();
                NDArray xs = x.duplicate();
                NDArray ys = y.duplicate();
                xs.attach(stepManager);
                ys.attach(stepManager);
                try (Batch batch =
                        new Batch(
                                stepManager,
                                new NDList(xs),
                                new NDList(ys),
                                (int) input.get(0),
                                Batchifier.STACK,
                                Batchifier.STACK,
                                step,
                                STEPS)) {
                    EasyTrain.trainBatch(trainer, batch);
                    if (step == 0) {
                        assertFp32GradientsReachTheModule(block);
                    }
                    trainer.step();
                }
                try (NDManager eval = data.newSubManager()) {
                    NDArray copy = x.duplicate();
                    copy.attach(eval);
                    NDList out = trainer.evaluate(new NDList(copy));
                    losses.add(trainer.getLoss().evaluate(new NDList(y), out).getFloat());
                }
            }
            nanos = System.nanoTime() - started;
            if (wrapped != null) {
                stage = find(wrapped.shadowOn(data.getDevice(), data));
            }
        }
        return new Run(losses, model, block, stage, nanos);
    }

    private static void assertFp32GradientsReachTheModule(Block block) {
        Block module = block.getChildren().get(0).getValue();
        if (!(module instanceof PtSymbolBlock)) {
            return;
        }
        int reached = 0;
        for (Pair<String, Parameter> p : module.getParameters()) {
            NDArray array = p.getValue().getArray();
            if (!array.hasGradient()) {
                continue;
            }
            NDArray gradient = array.getGradient();
            assertSame(DataType.FLOAT32, array.getDataType(), p.getKey());
            assertSame(DataType.FLOAT32, gradient.getDataType(), p.getKey());
            if (gradient.abs().sum().getFloat() > 0) {
                reached++;
            }
        }
        assertTrue(reached > 0, "no gradient reached the module's parameters");
    }

    /**
     * DJL's MNIST-with-LSTM example's model for inputs (8, 1, 7, 4): the example's reshape to (N,
     * H, W), the recurrent block, flatten, a Linear of 10.
     */
    static SequentialBlock mnistExampleModel(Block recurrent) {
        return new SequentialBlock()
                .add(x -> new NDList(x.head().reshape(8, 7, 4)))
                .add(recurrent)
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(10).build());
    }

    /** The first autocast stage of a shadow tree, depth first; null if none. */
    static AutocastStage find(Block shadow) {
        if (shadow instanceof AutocastStage) {
            return (AutocastStage) shadow;
        }
        for (Pair<String, Block> child : shadow.getChildren()) {
            AutocastStage found = find(child.getValue());
            if (found != null) {
                return found;
            }
        }
        return null;
    }
}
