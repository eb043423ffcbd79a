package io.github.djlamp.amp.pytorch;

import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.compile.ForwardGraph;
import io.github.djlamp.amp.compile.ForwardGraphBuilder;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.CompiledForward;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * The measured ceiling of the compiled forward: ResNetV1-18 on 1x32x32, a forward and backward of
 * DJL's eager forward against the compiled one (fp32 and bf16), alternating step by step. Run with
 * {@code -Damp.compile.measure=true -Dai.djl.pytorch.num_threads=1}; prints medians.
 */
@EnabledIfSystemProperty(named = "amp.compile.measure", matches = "true")
class CompiledForwardTiming {

    @Test
    void resNet18() {
        int batch = Integer.getInteger("amp.compile.batch", 1);
        int steps = Integer.getInteger("amp.compile.steps", 30);
        Block block =
                ResNetV1.builder()
                        .setImageShape(new Shape(1, 32, 32))
                        .setNumLayers(18)
                        .setOutSize(10)
                        .build();
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(3);
            Shape shape = new Shape(batch, 1, 32, 32);
            block.initialize(manager, DataType.FLOAT32, shape);
            NDArray x = manager.randomNormal(shape);
            ForwardGraph fp32 = ForwardGraphBuilder.of(block, Precision.FP32);
            ForwardGraph bf16 = ForwardGraphBuilder.of(block, Precision.BF16);
            NDList values = new NDList();
            for (Parameter parameter : fp32.parameters()) {
                values.add(parameter.getArray());
            }
            System.out.println(
                    "graph operations: "
                            + fp32.operations().size()
                            + ", parameters: "
                            + fp32.parameters().size()
                            + ", by kind: "
                            + fp32.operations().stream()
                                    .collect(
                                            java.util.stream.Collectors.groupingBy(
                                                    op -> op.getClass().getSimpleName(),
                                                    java.util.stream.Collectors.counting())));
            CompiledForward compiled32 = AmpBackends.forManager(manager).compileForward(fp32);
            CompiledForward compiled16 = AmpBackends.forManager(manager).compileForward(bf16);
            double[][] ms = new double[3][steps];
            for (int i = -5; i < steps; i++) {
                double eager = time(() -> eager(block, x));
                double c32 = time(() -> compiled(compiled32, x, values));
                double c16 = time(() -> compiled(compiled16, x, values));
                if (i >= 0) {
                    ms[0][i] = eager;
                    ms[1][i] = c32;
                    ms[2][i] = c16;
                }
            }
            System.out.printf(
                    "batch %d, median ms of forward+backward: DJL eager fp32 %.2f,"
                            + " compiled fp32 %.2f, compiled bf16 %.2f%n",
                    batch, median(ms[0]), median(ms[1]), median(ms[2]));
        }
    }

    private static void eager(Block block, NDArray x) {
        try (NDManager step = x.getManager().newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            NDArray out =
                    block.forward(new ParameterStore(step, false), new NDList(x), true)
                            .singletonOrThrow();
            collector.backward(out.sum());
        }
    }

    private static void compiled(CompiledForward forward, NDArray x, NDList values) {
        try (NDManager step = x.getManager().newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            NDArray out = forward.forward(new NDList(x), values, true);
            out.attach(step);
            collector.backward(out.sum());
        }
    }

    private static double time(Runnable run) {
        long start = System.nanoTime();
        run.run();
        return (System.nanoTime() - start) / 1e6;
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
