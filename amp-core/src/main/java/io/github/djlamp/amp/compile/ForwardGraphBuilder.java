package io.github.djlamp.amp.compile;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
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
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.norm.LayerNorm;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.util.Pair;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.Precision;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;

/**
 * Writes the {@link ForwardGraph} of blocks whose forward djl-amp can reproduce call for call:
 * SequentialBlock, Conv1d/2d/3d, Linear, BatchNorm, LayerNorm, Dropout and the lambdas of DJL's
 * functions ({@link LeafGraph}), ResNetV1's residual ParallelBlock, and DJL's self-attention and
 * transformer encoder ({@link TransformerGraph}), each in the precision a {@link GraphPlan} gives
 * it. Any other block, or a block the plan runs another way, is refused with a {@link
 * NotCompilableException} naming the block and why; the caller then runs it eagerly.
 */
public final class ForwardGraphBuilder {

    private final Precision lowPrecision;
    private final GraphPlan plan;
    private final List<ForwardOp> operations = new ArrayList<>();
    private final List<Parameter> parameters = new ArrayList<>();
    private final int inputs;
    private int values;
    // the value of the offsets attention adds to its scaled scores, -1 for none
    private int attentionMask = -1;

    private ForwardGraphBuilder(Precision lowPrecision, GraphPlan plan, int inputs) {
        this.lowPrecision = lowPrecision;
        this.plan = plan;
        this.inputs = inputs;
        this.values = inputs;
    }

    /**
     * Returns the graph of {@code block}'s whole forward under djl-amp's default rules, with
     * convolutions and linear layers in {@code lowPrecision} (FP32 for none), the output in fp32.
     *
     * @param block the root of the tree
     * @param lowPrecision the precision of convolutions and linear layers
     * @return the graph
     * @throws NotCompilableException naming the first block that has no compiled form
     */
    public static ForwardGraph of(Block block, Precision lowPrecision) {
        ForwardGraphBuilder builder =
                new ForwardGraphBuilder(lowPrecision, GraphPlan.defaults(), 1);
        builder.add(block, 0, "");
        return builder.graph(false, true);
    }

    /**
     * Returns the graph of a run of blocks, each the next one's input, as {@code plan} runs them: a
     * run of a SequentialBlock's children inside djl-amp's shadow tree. The output stays in the
     * precision its last operation computes in.
     *
     * @param run the blocks in order, each with its path
     * @param plan what the wrapper decided for each block
     * @param lowPrecision the compute precision of 16-bit layers (FP32 for none)
     * @param inputLow whether the input arrives in {@code lowPrecision}
     * @return the graph
     * @throws NotCompilableException naming the first block that has no compiled form
     */
    public static ForwardGraph of(
            List<Pair<String, Block>> run,
            GraphPlan plan,
            Precision lowPrecision,
            boolean inputLow) {
        return new ForwardGraphBuilder(lowPrecision, plan, 1).chain(run, inputLow);
    }

    /**
     * Returns the graph of DJL's BERT encoder stack as its {@code BertBlock} runs it: each {@code
     * TransformerEncoderBlock} on the one before's output (value 0 for the first) and on the
     * offsets of the attention mask (value 1: fp32, (B, 1, S, S)), which every attention adds to
     * its scaled scores. The output stays in the precision its last operation computes in.
     *
     * @param encoders the encoder blocks in order, each with its path
     * @param plan what the wrapper decided for each block
     * @param lowPrecision the compute precision of 16-bit layers (FP32 for none)
     * @param inputLow whether value 0 arrives in {@code lowPrecision}
     * @return the graph
     * @throws NotCompilableException naming the first block that has no compiled form
     */
    public static ForwardGraph ofMaskedEncoders(
            List<Pair<String, Block>> encoders,
            GraphPlan plan,
            Precision lowPrecision,
            boolean inputLow) {
        for (Pair<String, Block> encoder : encoders) {
            if (encoder.getValue().getClass() != TransformerEncoderBlock.class) {
                throw new NotCompilableException(
                        encoder.getKey(), "not DJL's TransformerEncoderBlock itself");
            }
        }
        ForwardGraphBuilder builder = new ForwardGraphBuilder(lowPrecision, plan, 2);
        builder.attentionMask = 1;
        return builder.chain(encoders, inputLow);
    }

    /** Each block on the one before's output, the first on value 0. */
    private ForwardGraph chain(List<Pair<String, Block>> run, boolean inputLow) {
        int value = 0;
        for (Pair<String, Block> block : run) {
            value = add(block.getValue(), value, block.getKey());
        }
        return graph(inputLow, false);
    }

    private ForwardGraph graph(boolean inputLow, boolean fp32Output) {
        return new ForwardGraph(
                List.copyOf(operations),
                List.copyOf(parameters),
                lowPrecision,
                inputs,
                inputLow,
                fp32Output);
    }

    /**
     * Adds the operations of {@code block} on value {@code in}.
     *
     * @return the value of its output
     * @throws NotCompilableException where it, or a block inside it, has no compiled form
     */
    int add(Block block, int in, String path) {
        Class<?> type = block.getClass();
        CastCategory category = plan.categoryOf(path, block);
        if (category == null) {
            throw new NotCompilableException(
                    path, "djl-amp runs it under the engine's autocast or over its children");
        }
        boolean container =
                isPlainSequential(type)
                        || type == ParallelBlock.class
                        || TransformerGraph.isComposite(type);
        boolean layer = isLayer(type);
        boolean leaf = isLeaf(type);
        if (category == CastCategory.CONTAINER) {
            if (!container) {
                throw new NotCompilableException(path, type.getName() + " has no compiled form");
            }
            if (isPlainSequential(type)) {
                return sequential((SequentialBlock) block, in, path);
            }
            if (type == ParallelBlock.class) {
                return join((ParallelBlock) block, in, path);
            }
            if (type == ScaledDotProductAttentionBlock.class) {
                return TransformerGraph.attention(
                        this, (ScaledDotProductAttentionBlock) block, in, path);
            }
            return TransformerGraph.encoder(this, (TransformerEncoderBlock) block, in, path);
        }
        if (layer) {
            return layer(block, in, path, category);
        }
        if (!leaf) {
            if (category == CastCategory.PASS_THROUGH) {
                throw new NotCompilableException(
                        path, "the policy runs it as pass_through, a unit only on what reaches it");
            }
            return UnitGraph.unit(this, block, in, path, category);
        }
        int input = in;
        if (category == CastCategory.FP32) {
            input = values++;
            operations.add(new ForwardOp.ToFp32(input, in));
        } else if (category != CastCategory.PASS_THROUGH) {
            throw new NotCompilableException(
                    path,
                    "the policy runs it as "
                            + category.configName()
                            + "; compiled, it runs only on what reaches it or in fp32");
        }
        return LeafGraph.leaf(this, block, input, path);
    }

    /** DJL's convolutions and linear layer: the layers that compute in 16 bits. */
    static boolean isLayer(Class<?> type) {
        return type == Conv1d.class
                || type == Conv2d.class
                || type == Conv3d.class
                || type == Linear.class;
    }

    /** The blocks without children {@link LeafGraph} writes, which run on what reaches them. */
    static boolean isLeaf(Class<?> type) {
        return type == BatchNorm.class
                || type == LambdaBlock.class
                || type == LayerNorm.class
                || type == Dropout.class;
    }

    /**
     * Adds one operation that writes a new value.
     *
     * @param operation the operation, given the number of the value it writes
     * @return that value
     */
    int emit(IntFunction<ForwardOp> operation) {
        int out = values++;
        operations.add(operation.apply(out));
        return out;
    }

    /** The plan the graph follows. */
    GraphPlan plan() {
        return plan;
    }

    /** The value of the offsets attention adds to its scaled scores, -1 where there are none. */
    int attentionMask() {
        return attentionMask;
    }

    /** The precision of the graph's 16-bit operations, FP32 where it has none. */
    Precision lowPrecision() {
        return lowPrecision;
    }

    private int join(ParallelBlock block, int in, String path) {
        List<Integer> branches = new ArrayList<>();
        for (Pair<String, Block> branch : block.getChildren()) {
            branches.add(add(branch.getValue(), in, child(path, branch.getKey())));
        }
        return UnitGraph.join(this, block, branches, path, plan.fp32Join(path));
    }

    /** A convolution or linear layer: 16 bits where the plan and its kernel check say so. */
    private int layer(Block block, int in, String path, CastCategory category) {
        boolean low;
        if (category == CastCategory.LOW || category == CastCategory.TRUSTED) {
            low = lowPrecision != Precision.FP32 && plan.runsLow(path);
        } else if (category == CastCategory.FP32) {
            low = false;
        } else {
            throw new NotCompilableException(
                    path,
                    "the policy runs it as "
                            + category.configName()
                            + "; compiled, a layer runs in 16 bits or fp32");
        }
        return layer(block, in, path, low, low && plan.channelsLast(path));
    }

    /**
     * A convolution or linear layer in 16 bits ({@code low}) or fp32; a 16-bit 2-D convolution
     * takes channels-last operands where {@code channelsLast} says so.
     */
    int layer(Block block, int in, String path, boolean low, boolean channelsLast) {
        int out = values++;
        if (block instanceof Linear) {
            operations.add(
                    new ForwardOp.Linear(
                            out,
                            in,
                            parameter(block, "weight", path),
                            optionalParameter(block, "bias"),
                            low));
            return out;
        }
        Convolution convolution = (Convolution) block;
        Shape kernel = convolution.getKernelShape();
        operations.add(
                new ForwardOp.Convolution(
                        out,
                        in,
                        parameter(block, "weight", path),
                        optionalParameter(block, "bias"),
                        kernel.dimension(),
                        convolution.getStride().getShape(),
                        convolution.getPadding().getShape(),
                        convolution.getDilation().getShape(),
                        convolution.getGroups(),
                        low,
                        channelsLast && kernel.dimension() == 2));
        return out;
    }

    private static String child(String path, String name) {
        return BlockPaths.child(path, name);
    }

    /** SequentialBlock, or a subclass that only builds its children (d2l's and DJL's Mlp). */
    static boolean isPlainSequential(Class<?> type) {
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
            value = add(child.getValue(), value, child(path, child.getKey()));
        }
        return value;
    }

    /** Adds a parameter the graph reads, by its name in the block, and returns its index. */
    int parameter(Block block, String name, String path) {
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
