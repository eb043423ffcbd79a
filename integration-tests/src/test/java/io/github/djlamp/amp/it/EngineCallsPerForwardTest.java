package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.BertPretrainingBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.github.djlamp.amp.Amp;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a 16-bit forward asks of the engine in the steady state, counted as libtorch's profiler sees
 * it (each operation the JVM calls into libtorch is one top-level event): DJL's own operations,
 * plus the input's cast, the output's cast and one call casting the step's weights. Before issue
 * 41, each 16-bit layer added a cast of its weight and of its bias, a question whether its input
 * needs a gradient and one about its input's type: 109 calls more than DJL's 155 on ResNetV1-18.
 * With the compiled forward (the default), the whole tree is one call, a ResNet's or a stack of
 * DJL's transformer encoder blocks'.
 */
class EngineCallsPerForwardTest {

    @TempDir Path dir;

    @Test
    void aSteadyBf16ForwardCallsTheEngineAsOftenAsDjlsOwnPlusFourCalls() throws Exception {
        Shape input = new Shape(2, 1, 16, 16);
        List<String> djl = steadyForwardOps(resnet(), false, input);
        List<String> amp =
                steadyForwardOps(
                        Amp.wrap(resnet(), "mixed_bfloat16").compileForward(false), true, input);
        long convolutions = djl.stream().filter("aten::conv2d"::equals).count();
        assertEquals(
                convolutions,
                amp.stream().filter("aten::conv2d"::equals).count(),
                "every convolution runs in both");
        assertAtMostMore(4, djl, amp);
    }

    @Test
    void aSteadyCompiledBf16ForwardIsAFewEngineCalls() throws Exception {
        Shape input = new Shape(2, 1, 16, 16);
        List<String> djl = steadyForwardOps(resnet(), false, input);
        List<String> compiled = steadyForwardOps(Amp.wrap(resnet(), "mixed_bfloat16"), true, input);
        // the whole tree in one call, and the output's cast to fp32: DJL's own forward makes
        // one call an operation (118 here)
        assertEquals(List.of("forward", "to_fp32_0"), compiled, "DJL's: " + djl.size());
    }

    @Test
    void aSteadyBf16TransformerForwardAddsOnlyTheCastsAroundSoftmax() throws Exception {
        Shape input = new Shape(2, 8, 16);
        List<String> djl = steadyForwardOps(transformer(), false, input);
        List<String> amp =
                steadyForwardOps(
                        Amp.wrap(transformer(), "mixed_bfloat16").compileForward(false),
                        true,
                        input);
        // as under PyTorch's autocast, softmax runs in fp32: each block casts its scores to fp32
        // and its attention weights back; and it makes its scale 1/sqrt(h) in the engine, where
        // DJL's create(float) wraps a Java buffer that backward could read after it is freed
        assertAtMostMore(4 + 3 * TRANSFORMER_BLOCKS, djl, amp);
    }

    @Test
    void aSteadyCompiledBf16TransformerForwardIsAFewEngineCalls() throws Exception {
        Shape input = new Shape(2, 8, 16);
        List<String> djl = steadyForwardOps(transformer(), false, input);
        List<String> compiled =
                steadyForwardOps(Amp.wrap(transformer(), "mixed_bfloat16"), true, input);
        assertEquals(List.of("forward", "to_fp32_0"), compiled, "DJL's: " + djl.size());
    }

    /**
     * DJL's BERT (a BertPretrainingBlock, 4 encoder blocks): its encoder stack is one call, the
     * embeddings, mask, pooling and pretraining heads around it run eagerly.
     */
    @Test
    void aSteadyCompiledBertForwardCallsItsEncodersOnce() throws Exception {
        List<String> djl = steadyBertForwardOps(null);
        List<String> compiled = steadyBertForwardOps("mixed_bfloat16");
        assertEquals(
                1,
                compiled.stream().filter("forward"::equals).count(),
                "one compiled call: " + compiled);
        assertTrue(
                compiled.size() * 3 < djl.size(),
                "djl-amp's compiled bf16 BERT forward calls the engine "
                        + compiled.size()
                        + " times, DJL's fp32 forward "
                        + djl.size());
    }

    /** The top-level operations of a small BERT's third training forward, in order. */
    private List<String> steadyBertForwardOps(String policy) throws Exception {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            NDList inputs =
                    new NDList(
                            manager.randomInteger(0, 32, new Shape(2, 8), DataType.INT32),
                            manager.zeros(new Shape(2, 8), DataType.INT32),
                            manager.ones(new Shape(2, 8), DataType.INT32),
                            manager.create(new int[] {1, 3, 2, 5}, new Shape(2, 2)));
            BertPretrainingBlock model =
                    new BertPretrainingBlock(
                            BertBlock.builder()
                                    .setTokenDictionarySize(32)
                                    .optEmbeddingSize(16)
                                    .optTransformerBlockCount(4)
                                    .optAttentionHeadCount(2)
                                    .optHiddenSize(32)
                                    .optMaxSequenceLength(8));
            model.initialize(manager, DataType.FLOAT32, inputs.getShapes());
            Block block = policy == null ? model : Amp.wrap(model, policy);
            Path trace = dir.resolve("trace-bert-" + policy + ".json");
            for (int step = 0; step < 3; step++) {
                try (NDManager m = manager.newSubManager();
                        GradientCollector collector = Engine.getInstance().newGradientCollector()) {
                    if (step == 2) {
                        JniUtils.startProfile(false, false, false);
                    }
                    NDList out;
                    try {
                        out = block.forward(new ParameterStore(m, false), inputs, true);
                    } finally {
                        if (step == 2) {
                            JniUtils.stopProfile(trace.toString());
                        }
                    }
                    collector.backward(out.get(0).sum().add(out.get(1).sum()));
                }
            }
            return topLevelOps(trace);
        }
    }

    /** Asserts that djl-amp's forward made at most {@code more} engine calls beyond DJL's. */
    private static void assertAtMostMore(int more, List<String> djl, List<String> amp) {
        List<String> added = new ArrayList<>(amp);
        for (String op : djl) {
            added.remove(op);
        }
        assertTrue(
                amp.size() <= djl.size() + more,
                "djl-amp's bf16 forward calls the engine "
                        + amp.size()
                        + " times, DJL's fp32 forward "
                        + djl.size()
                        + "; djl-amp's calls beyond DJL's: "
                        + added);
    }

    private static final int TRANSFORMER_BLOCKS = 2;

    private static Block transformer() {
        SequentialBlock net = new SequentialBlock().add(Linear.builder().setUnits(32).build());
        for (int i = 0; i < TRANSFORMER_BLOCKS; i++) {
            net.add(new TransformerEncoderBlock(32, 4, 64, 0f, Activation::gelu));
        }
        return net.add(Blocks.batchFlattenBlock()).add(Linear.builder().setUnits(10).build());
    }

    private static Block resnet() {
        return ResNetV1.builder()
                .setImageShape(new Shape(1, 16, 16))
                .setNumLayers(20)
                .setOutSize(10)
                .build();
    }

    /** The top-level operations of the third training forward, in order. */
    private List<String> steadyForwardOps(Block block, boolean amp, Shape input) throws Exception {
        try (Model model = Model.newInstance("calls-" + amp + input, "PyTorch")) {
            model.setBlock(block);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.01f))
                                            .build());
            try (Trainer trainer =
                    model.newTrainer(amp ? Amp.configure(config, model.getBlock()) : config)) {
                trainer.initialize(input);
                Path trace = dir.resolve("trace-" + amp + "-" + input.size() + ".json");
                for (int step = 0; step < 3; step++) {
                    try (NDManager m = trainer.getManager().newSubManager()) {
                        NDArray x = m.randomUniform(0f, 1f, input);
                        NDArray y = m.create(new float[] {1, 3});
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            if (step == 2) {
                                JniUtils.startProfile(false, false, false);
                            }
                            NDList out;
                            try {
                                out = trainer.forward(new NDList(x));
                            } finally {
                                if (step == 2) {
                                    JniUtils.stopProfile(trace.toString());
                                }
                            }
                            assertEquals(DataType.FLOAT32, out.head().getDataType());
                            collector.backward(trainer.getLoss().evaluate(new NDList(y), out));
                        }
                        trainer.step();
                    }
                }
                return topLevelOps(trace);
            }
        }
    }

    /** The names of the trace's events that no other event encloses, in time order. */
    private static List<String> topLevelOps(Path trace) throws Exception {
        List<JsonObject> events = new ArrayList<>();
        try (Reader reader = Files.newBufferedReader(trace)) {
            JsonElement root = JsonParser.parseReader(reader);
            for (JsonElement e :
                    root.isJsonArray()
                            ? root.getAsJsonArray()
                            : root.getAsJsonObject().getAsJsonArray("traceEvents")) {
                JsonObject event = e.getAsJsonObject();
                if (event.has("ph") && "X".equals(event.get("ph").getAsString())) {
                    events.add(event);
                }
            }
        }
        events.sort(
                Comparator.comparingDouble((JsonObject e) -> e.get("ts").getAsDouble())
                        .thenComparingDouble(e -> -duration(e)));
        List<String> top = new ArrayList<>();
        double openUntil = Double.NEGATIVE_INFINITY;
        for (JsonObject event : events) {
            double start = event.get("ts").getAsDouble();
            if (start >= openUntil) {
                top.add(event.get("name").getAsString());
                openUntil = start + duration(event);
            }
        }
        return top;
    }

    private static double duration(JsonObject event) {
        return event.has("dur") ? event.get("dur").getAsDouble() : 0;
    }
}
