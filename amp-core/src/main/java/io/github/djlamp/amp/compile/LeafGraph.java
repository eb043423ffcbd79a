package io.github.djlamp.amp.compile;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.norm.LayerNorm;
import io.github.djlamp.amp.bytecode.CapturedValues;
import io.github.djlamp.amp.bytecode.ForwardCode;
import io.github.djlamp.amp.internal.DjlSeam;
import io.github.djlamp.amp.policy.KnownFunctions;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The compiled forms of DJL's blocks without children that run on what reaches them: BatchNorm,
 * LayerNorm, Dropout and the lambdas of DJL's functions (activations, LeakyReLU with its alpha,
 * flatten, identity, pooling), each as DJL's PyTorch engine calls it.
 */
final class LeafGraph {

    private static final Map<String, String> POINTWISE =
            Map.of(
                    "ReLU", "relu", "ReLU6", "relu6", "sigmoid", "sigmoid", "Tanh", "tanh", "GELU",
                    "gelu");

    /** The pooling factories whose captured kernel, stride, padding and ceiling mode it reads. */
    private static final Pattern POOL = Pattern.compile("(max|avg)Pool([123])d");

    private LeafGraph() {}

    /** One of the blocks {@link ForwardGraphBuilder#isLeaf} names, on value {@code in}. */
    static int leaf(ForwardGraphBuilder graph, Block block, int in, String path) {
        if (block instanceof BatchNorm norm) {
            return batchNorm(graph, norm, in, path);
        }
        if (block instanceof LayerNorm norm) {
            return layerNorm(graph, norm, in, path);
        }
        if (block instanceof Dropout dropout) {
            return dropout(graph, dropout, in);
        }
        return lambda(graph, (LambdaBlock) block, in, path);
    }

    static int batchNorm(ForwardGraphBuilder graph, BatchNorm block, int in, String path) {
        float[] settings = DjlSeam.batchNormSettings(block);
        int axis = (int) settings[0];
        return graph.emit(
                o ->
                        new ForwardOp.BatchNorm(
                                o,
                                in,
                                graph.parameter(block, "gamma", path),
                                graph.parameter(block, "beta", path),
                                graph.parameter(block, "runningMean", path),
                                graph.parameter(block, "runningVar", path),
                                // DJL's engine reads -1 as PyTorch's axis 1, swaps any other to 1
                                axis == -1 ? 1 : axis,
                                // DJL's engine passes 1 - momentum, computed in float
                                (double) (1f - settings[2]),
                                (double) settings[1]));
    }

    static int layerNorm(ForwardGraphBuilder graph, LayerNorm block, int in, String path) {
        // DJL sets the shape at initialization; a tree checked before has it by its first forward
        Shape normalized = (Shape) DjlSeam.read(block, LayerNorm.class, "normalizedShape");
        double epsilon = (float) DjlSeam.read(block, LayerNorm.class, "epsilon");
        return graph.emit(
                o ->
                        new ForwardOp.LayerNorm(
                                o,
                                in,
                                graph.parameter(block, "gamma", path),
                                graph.parameter(block, "beta", path),
                                normalized == null ? null : normalized.getShape(),
                                epsilon));
    }

    static int dropout(ForwardGraphBuilder graph, Dropout block, int in) {
        double rate = DjlSeam.dropoutRate(block);
        return graph.emit(o -> new ForwardOp.Dropout(o, in, rate));
    }

    static int lambda(ForwardGraphBuilder graph, LambdaBlock block, int in, String path) {
        String label = KnownFunctions.labelOf(block);
        if (label == null) {
            try {
                return ForwardCode.lambda(block, in, UnitGraph.operations(graph, null, path));
            } catch (ForwardCode.UnreadableException e) {
                throw new NotCompilableException(
                        path, "a lambda that is not one of DJL's functions: " + e.getMessage());
            }
        }
        Matcher pool = POOL.matcher(label);
        if ("identity".equals(label)) {
            return in;
        } else if (POINTWISE.containsKey(label)) {
            return graph.emit(o -> new ForwardOp.Pointwise(o, in, POINTWISE.get(label)));
        } else if ("LeakyReLU".equals(label)) {
            return leakyRelu(graph, block, in, path);
        } else if ("batchFlatten".equals(label)) {
            return graph.emit(o -> new ForwardOp.Flatten(o, in));
        } else if (pool.matches()) {
            return pool(graph, block, in, path, pool);
        } else if (label.matches("globalAvgPool[123]d")) {
            int dims = label.charAt(13) - '0';
            return graph.emit(o -> new ForwardOp.GlobalAvgPool(o, in, dims));
        }
        throw new NotCompilableException(path, "DJL's " + label + " has no compiled form");
    }

    /** DJL's {@code Activation.leakyReluBlock(alpha)}, with the alpha its lambda captured. */
    private static int leakyRelu(
            ForwardGraphBuilder graph, LambdaBlock block, int in, String path) {
        List<Object> captured = CapturedValues.of(block);
        if (captured == null || captured.size() != 1 || !(captured.get(0) instanceof Float alpha)) {
            throw new NotCompilableException(
                    path, "DJL's LeakyReLU with an alpha djl-amp cannot read");
        }
        return graph.emit(o -> new ForwardOp.LeakyRelu(o, in, alpha.doubleValue()));
    }

    /** DJL's max or average pooling, with the settings its factory's lambda captured. */
    private static int pool(
            ForwardGraphBuilder graph, LambdaBlock block, int in, String path, Matcher kind) {
        List<Object> captured = CapturedValues.of(block);
        int dims = kind.group(2).charAt(0) - '0';
        boolean max = "max".equals(kind.group(1));
        // maxPool: kernel, stride, padding, ceil; avgPool: the same, then countIncludePad
        if (captured == null
                || captured.size() != (max ? 4 : 5)
                || !(captured.get(0) instanceof Shape kernel)
                || !(captured.get(1) instanceof Shape stride)
                || !(captured.get(2) instanceof Shape padding)
                || !(captured.get(3) instanceof Boolean ceil)
                || kernel.dimension() != dims) {
            throw new NotCompilableException(
                    path, "DJL's " + kind.group() + " with settings djl-amp cannot read");
        }
        return graph.emit(
                o ->
                        new ForwardOp.Pool(
                                o,
                                in,
                                max,
                                dims,
                                kernel.getShape(),
                                stride.getShape(),
                                padding.getShape(),
                                ceil));
    }
}
