package io.github.djlamp.amp.compile;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.BlockList;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv1d;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.convolutional.Conv3d;
import ai.djl.nn.convolutional.Convolution;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.util.Pair;
import io.github.djlamp.amp.internal.DjlSeam;
import io.github.djlamp.amp.policy.KnownFunctions;
import io.github.djlamp.amp.policy.Precision;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Writes the {@link ForwardGraph} of a block tree made only of blocks whose forward djl-amp can
 * reproduce call for call: SequentialBlock, Conv1d/2d/3d, BatchNorm over axis 1, Linear, the
 * lambdas of DJL's activations, flatten, identity and global average pooling, and ResNetV1's
 * residual ParallelBlock. Any other block, or a tree not initialized, is refused with a {@link
 * NotCompilableException} naming the block and why; the caller then runs the tree as before.
 */
public final class ForwardGraphBuilder {

    private static final Map<String, String> POINTWISE =
            Map.of("ReLU", "relu", "sigmoid", "sigmoid", "Tanh", "tanh");

    private final Precision lowPrecision;
    private final List<ForwardOp> operations = new ArrayList<>();
    private final List<Parameter> parameters = new ArrayList<>();
    private int values = 1;

    private ForwardGraphBuilder(Precision lowPrecision) {
        this.lowPrecision = lowPrecision;
    }

    /**
     * Returns the graph of {@code block}'s forward, with convolutions and linear layers in {@code
     * lowPrecision} (FP32 for none).
     *
     * @param block the root of the tree
     * @param lowPrecision the precision of convolutions and linear layers
     * @return the graph
     * @throws NotCompilableException naming the first block that has no compiled form
     */
    public static ForwardGraph of(Block block, Precision lowPrecision) {
        return of(block, lowPrecision, false);
    }

    /**
     * Returns the graph of {@code block}'s forward, as {@link #of(Block, Precision)}, with 2-D
     * convolutions' 16-bit input and weight channels-last where {@code channelsLast} says so.
     *
     * @param block the root of the tree
     * @param lowPrecision the precision of convolutions and linear layers
     * @param channelsLast whether 16-bit 2-D convolutions run channels-last
     * @return the graph
     * @throws NotCompilableException naming the first block that has no compiled form
     */
    public static ForwardGraph of(Block block, Precision lowPrecision, boolean channelsLast) {
        ForwardGraphBuilder builder = new ForwardGraphBuilder(lowPrecision);
        builder.add(block, 0, block.getClass().getSimpleName());
        return new ForwardGraph(
                List.copyOf(builder.operations),
                List.copyOf(builder.parameters),
                lowPrecision,
                channelsLast);
    }

    private int add(Block block, int in, String path) {
        if (!block.isInitialized()) {
            throw new NotCompilableException(path, "not initialized");
        }
        Class<?> type = block.getClass();
        if (isPlainSequential(type)) {
            return sequential((SequentialBlock) block, in, path);
        }
        if (type == Conv1d.class || type == Conv2d.class || type == Conv3d.class) {
            return convolution((Convolution) block, in);
        }
        if (type == Linear.class) {
            int out = values++;
            operations.add(
                    new ForwardOp.Linear(
                            out,
                            in,
                            parameter(block, "weight", path),
                            optionalParameter(block, "bias"),
                            lowPrecision != Precision.FP32));
            return out;
        }
        if (type == BatchNorm.class) {
            return batchNorm((BatchNorm) block, in, path);
        }
        if (type == LambdaBlock.class) {
            return lambda((LambdaBlock) block, in, path);
        }
        if (type == ParallelBlock.class && KnownFunctions.isAddReluJoin((ParallelBlock) block)) {
            BlockList branches = block.getChildren();
            int a = add(branches.get(0).getValue(), in, path + "/" + branches.get(0).getKey());
            int b = add(branches.get(1).getValue(), in, path + "/" + branches.get(1).getKey());
            int out = values++;
            operations.add(new ForwardOp.AddRelu(out, a, b));
            return out;
        }
        throw new NotCompilableException(
                path,
                type.getName()
                        + (type == ParallelBlock.class
                                ? " with a join other than ResNetV1's add and relu"
                                : " has no compiled form"));
    }

    /** SequentialBlock, or a subclass that only builds its children (d2l's and DJL's Mlp). */
    private static boolean isPlainSequential(Class<?> type) {
        for (Class<?> c = type; c != SequentialBlock.class; c = c.getSuperclass()) {
            if (c == null) {
                return false;
            }
            for (Method method : c.getDeclaredMethods()) {
                if (method.getName().startsWith("forward")) {
                    return false;
                }
            }
        }
        return true;
    }

    private int sequential(SequentialBlock block, int in, String path) {
        if (block.isReturnIntermediate()) {
            throw new NotCompilableException(path, "returns its intermediate outputs");
        }
        int value = in;
        for (Pair<String, Block> child : block.getChildren()) {
            value = add(child.getValue(), value, path + "/" + child.getKey());
        }
        return value;
    }

    private int convolution(Convolution block, int in) {
        Shape kernel = block.getKernelShape();
        int out = values++;
        operations.add(
                new ForwardOp.Convolution(
                        out,
                        in,
                        parameter(block, "weight", ""),
                        optionalParameter(block, "bias"),
                        kernel.dimension(),
                        block.getStride().getShape(),
                        block.getPadding().getShape(),
                        block.getDilation().getShape(),
                        block.getGroups(),
                        lowPrecision != Precision.FP32));
        return out;
    }

    private int batchNorm(BatchNorm block, int in, String path) {
        float[] settings = DjlSeam.batchNormSettings(block);
        int axis = (int) settings[0];
        if (axis != 1 && axis != -1) {
            // DJL swaps the axis to 1 around the kernel; not reproduced yet
            throw new NotCompilableException(path, "BatchNorm over axis " + axis);
        }
        int out = values++;
        operations.add(
                new ForwardOp.BatchNorm(
                        out,
                        in,
                        parameter(block, "gamma", path),
                        parameter(block, "beta", path),
                        parameter(block, "runningMean", path),
                        parameter(block, "runningVar", path),
                        // DJL's engine passes 1 - momentum, computed in float
                        (double) (1f - settings[2]),
                        (double) settings[1]));
        return out;
    }

    private int lambda(LambdaBlock block, int in, String path) {
        String label = KnownFunctions.labelOf(block);
        if (label == null) {
            throw new NotCompilableException(path, "a lambda that is not one of DJL's functions");
        }
        int out = values;
        if ("identity".equals(label)) {
            return in;
        } else if (POINTWISE.containsKey(label)) {
            operations.add(new ForwardOp.Pointwise(out, in, POINTWISE.get(label)));
        } else if ("batchFlatten".equals(label)) {
            operations.add(new ForwardOp.Flatten(out, in));
        } else if (label.matches("globalAvgPool[123]d")) {
            operations.add(new ForwardOp.GlobalAvgPool(out, in, label.charAt(13) - '0'));
        } else {
            throw new NotCompilableException(path, "DJL's " + label + " has no compiled form");
        }
        values++;
        return out;
    }

    private int parameter(Block block, String name, String path) {
        int index = optionalParameter(block, name);
        if (index < 0) {
            throw new NotCompilableException(path, "no parameter " + name);
        }
        return index;
    }

    private int optionalParameter(Block block, String name) {
        for (Pair<String, Parameter> parameter : block.getDirectParameters()) {
            if (parameter.getKey().equals(name)) {
                parameters.add(parameter.getValue());
                return parameters.size() - 1;
            }
        }
        return -1;
    }
}
