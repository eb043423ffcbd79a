package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.basic.Mlp;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.compile.ForwardGraph;
import io.github.djlamp.amp.compile.ForwardGraphBuilder;
import io.github.djlamp.amp.compile.NotCompilableException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.CompiledForward;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The compiled forward against DJL's eager forward: in fp32 the same ATen calls in the same order,
 * so outputs, every parameter gradient and BatchNorm's running statistics are bitwise equal; in
 * bf16, gradients near the fp32 ones.
 */
class CompiledForwardTest {

    /** What one training forward and backward left: output, gradients, running statistics. */
    private record StepResult(float[] output, List<float[]> gradients, List<float[]> buffers) {}

    @Test
    void resNetFp32IsBitwiseDjl() {
        Block resNet =
                ResNetV1.builder()
                        .setImageShape(new Shape(1, 32, 32))
                        .setNumLayers(18)
                        .setOutSize(10)
                        .build();
        assertBitwise(resNet, new Shape(2, 1, 32, 32));
    }

    @Test
    void mlpFp32IsBitwiseDjl() {
        assertBitwise(new Mlp(12, 5, new int[] {16, 8}), new Shape(4, 12));
    }

    @Test
    void mlpBf16GradientsAreNearFp32() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block mlp = new Mlp(12, 5, new int[] {16, 8});
            NDArray x = initialize(mlp, manager, new Shape(4, 12));
            StepResult fp32 = compiled(mlp, x, Precision.FP32);
            StepResult bf16 = compiled(mlp, x, Precision.BF16);
            for (int i = 0; i < fp32.gradients().size(); i++) {
                assertNear(
                        fp32.gradients().get(i), bf16.gradients().get(i), 0.03f, "gradient " + i);
            }
        }
    }

    @Test
    void aBlockWithoutCompiledFormIsNamedWithItsReason() {
        SequentialBlock block = new SequentialBlock();
        block.add(Linear.builder().setUnits(4).build())
                .add(Activation::relu)
                .add(Activation.eluBlock(1f));
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            block.initialize(manager, DataType.FLOAT32, new Shape(2, 3));
            NotCompilableException refusal =
                    assertThrows(
                            NotCompilableException.class,
                            () -> ForwardGraphBuilder.of(block, Precision.FP32));
            assertEquals("03LambdaBlock", refusal.getBlockPath());
            assertTrue(refusal.getReason().contains("ELU"), refusal.getReason());
        }
    }

    private static void assertBitwise(Block block, Shape inputShape) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            NDArray x = initialize(block, manager, inputShape);
            List<NDArray> buffers = buffers(block);
            List<NDArray> before = new ArrayList<>();
            buffers.forEach(b -> before.add(b.duplicate()));
            StepResult eager = eager(block, x);
            for (int i = 0; i < buffers.size(); i++) {
                before.get(i).copyTo(buffers.get(i));
            }
            StepResult compiled = compiled(block, x, Precision.FP32);
            assertArrayEquals(eager.output(), compiled.output(), 0f, "output");
            assertEquals(eager.gradients().size(), compiled.gradients().size());
            for (int i = 0; i < eager.gradients().size(); i++) {
                assertArrayEquals(
                        eager.gradients().get(i), compiled.gradients().get(i), 0f, "gradient " + i);
            }
            for (int i = 0; i < eager.buffers().size(); i++) {
                assertArrayEquals(
                        eager.buffers().get(i), compiled.buffers().get(i), 0f, "running stat " + i);
            }
        }
    }

    private static NDArray initialize(Block block, NDManager manager, Shape inputShape) {
        Engine.getInstance().setRandomSeed(11);
        block.initialize(manager, DataType.FLOAT32, inputShape);
        return manager.randomNormal(inputShape);
    }

    private static StepResult eager(Block block, NDArray x) {
        try (NDManager step = x.getManager().newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            collector.zeroGradients();
            NDArray out =
                    block.forward(new ParameterStore(step, false), new NDList(x), true)
                            .singletonOrThrow();
            collector.backward(loss(out));
            return result(block, out);
        }
    }

    private static StepResult compiled(Block block, NDArray x, Precision precision) {
        ForwardGraph graph = ForwardGraphBuilder.of(block, precision);
        NDList values = new NDList();
        for (Parameter parameter : graph.parameters()) {
            values.add(parameter.getArray());
        }
        CompiledForward forward = AmpBackends.forManager(x.getManager()).compileForward(graph);
        try (NDManager step = x.getManager().newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            collector.zeroGradients();
            NDArray out = forward.forward(new NDList(x), values, true);
            out.attach(step);
            collector.backward(loss(out));
            return result(block, out);
        }
    }

    /** A loss whose gradient differs by element, so that a swapped element shows. */
    private static NDArray loss(NDArray out) {
        NDArray weights = out.getManager().arange((float) out.size()).reshape(out.getShape());
        return out.mul(out).mul(weights.add(1f)).sum();
    }

    private static StepResult result(Block block, NDArray out) {
        List<float[]> gradients = new ArrayList<>();
        List<float[]> stats = new ArrayList<>();
        for (Parameter parameter : parameters(block)) {
            NDArray array = parameter.getArray();
            if (parameter.requiresGradient()) {
                gradients.add(array.getGradient().toFloatArray());
            } else {
                stats.add(array.toFloatArray());
            }
        }
        return new StepResult(out.toFloatArray(), gradients, stats);
    }

    private static List<Parameter> parameters(Block block) {
        List<Parameter> all = new ArrayList<>();
        block.getParameters().forEach(p -> all.add(p.getValue()));
        return all;
    }

    private static List<NDArray> buffers(Block block) {
        List<NDArray> buffers = new ArrayList<>();
        for (Parameter parameter : parameters(block)) {
            if (!parameter.requiresGradient()) {
                buffers.add(parameter.getArray());
            }
        }
        return buffers;
    }

    private static void assertNear(float[] expected, float[] actual, float tolerance, String what) {
        float scale = 0;
        for (float v : expected) {
            scale = Math.max(scale, Math.abs(v));
        }
        for (int i = 0; i < expected.length; i++) {
            assertEquals(expected[i], actual[i], tolerance * scale, what + " element " + i);
        }
    }
}
