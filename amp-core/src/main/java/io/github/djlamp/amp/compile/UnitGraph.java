package io.github.djlamp.amp.compile;

import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.BlockList;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.util.Pair;
import io.github.djlamp.amp.bytecode.ForwardCode;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.KnownFunctions;
import io.github.djlamp.amp.policy.Precision;
import java.util.ArrayList;
import java.util.List;

/**
 * The compiled form of a unit: a block with children that the wrapper runs as one stage (d2l-java's
 * {@code Residual}, whose forward djl-amp reads as safe, a hand-written residual block, a container
 * overridden as low, a user's block it does not know, in fp32). The stage casts the unit's input
 * and every convolution's and linear layer's weights to its precision, and the block's own code
 * runs on what that makes: the graph does the same, following the code of each block inside ({@link
 * ForwardCode} reads a user's forward and join), each convolution and linear layer in the unit's
 * precision, everything else on what reaches it.
 */
final class UnitGraph {

    private final ForwardGraphBuilder graph;
    private final boolean low;
    private final boolean channelsLast;

    private UnitGraph(ForwardGraphBuilder graph, boolean low, boolean channelsLast) {
        this.graph = graph;
        this.low = low;
        this.channelsLast = channelsLast;
    }

    /**
     * Adds the operations of the unit {@code block} on value {@code in}, as its stage runs it.
     *
     * @param category how the plan runs it: LOW, TRUSTED or FP32
     * @return the value of its output
     * @throws NotCompilableException where a block inside it, or its code, has no compiled form
     */
    static int unit(
            ForwardGraphBuilder graph, Block block, int in, String path, CastCategory category) {
        boolean low = category != CastCategory.FP32 && graph.lowPrecision() != Precision.FP32;
        GraphPlan.UnitCast cast = low ? graph.plan().unitCast(path) : null;
        if (cast != null && cast.low()) {
            int input =
                    graph.emit(o -> new ForwardOp.UnitInput(o, in, cast.layout(), cast.relayout()));
            return new UnitGraph(graph, true, cast.layout() == GraphPlan.Layout.CHANNELS_LAST)
                    .inside(block, input, path);
        }
        int input = graph.emit(o -> new ForwardOp.ToFp32(o, in));
        return new UnitGraph(graph, false, false).inside(block, input, path);
    }

    /**
     * Adds the join of a ParallelBlock on its branches' outputs: ResNetV1's add and relu, or a join
     * whose lambda {@link ForwardCode} reads.
     *
     * @param fp32 whether the branches' outputs are cast to fp32 before the join
     * @return the value of its output
     */
    static int join(
            ForwardGraphBuilder graph,
            ParallelBlock block,
            List<Integer> branches,
            String path,
            boolean fp32) {
        if (KnownFunctions.isAddReluJoin(block)) {
            int a = branches.get(0);
            int b = branches.get(1);
            return graph.emit(o -> new ForwardOp.AddRelu(o, a, b, fp32));
        }
        List<Integer> joined = new ArrayList<>();
        for (int branch : branches) {
            joined.add(fp32 ? graph.emit(o -> new ForwardOp.ToFp32(o, branch)) : branch);
        }
        try {
            return ForwardCode.join(block, joined, operations(graph, null, path));
        } catch (ForwardCode.UnreadableException e) {
            throw new NotCompilableException(path, "its join: " + e.getMessage());
        }
    }

    private int inside(Block block, int in, String path) {
        Class<?> type = block.getClass();
        if (ForwardGraphBuilder.isLayer(type)) {
            return graph.layer(block, in, path, low, channelsLast);
        }
        if (ForwardGraphBuilder.isLeaf(type)) {
            return LeafGraph.leaf(graph, block, in, path);
        }
        if (ForwardGraphBuilder.isPlainSequential(type)) {
            SequentialBlock sequential = (SequentialBlock) block;
            if (sequential.isReturnIntermediate()) {
                throw new NotCompilableException(path, "returns its intermediate outputs");
            }
            int value = in;
            for (Pair<String, Block> child : sequential.getChildren()) {
                value = inside(child.getValue(), value, BlockPaths.child(path, child.getKey()));
            }
            return value;
        }
        if (type == ParallelBlock.class) {
            BlockList children = block.getChildren();
            List<Integer> branches = new ArrayList<>();
            for (Pair<String, Block> branch : children) {
                branches.add(
                        inside(branch.getValue(), in, BlockPaths.child(path, branch.getKey())));
            }
            return join(graph, (ParallelBlock) block, branches, path, false);
        }
        if (block instanceof AbstractBlock own && !block.getChildren().isEmpty()) {
            try {
                return ForwardCode.forward(own, in, operations(graph, this, path));
            } catch (ForwardCode.UnreadableException e) {
                throw new NotCompilableException(path, e.getMessage());
            }
        }
        throw new NotCompilableException(
                path, type.getName() + " has no compiled form inside a unit");
    }

    /**
     * The graph's operations for code read at {@code path}; a child's forward runs in {@code unit}.
     */
    static ForwardCode.Operations operations(
            ForwardGraphBuilder graph, UnitGraph unit, String path) {
        return new ForwardCode.Operations() {
            @Override
            public int forward(Block child, String name, int input) {
                if (unit == null) {
                    throw new NotCompilableException(path, "its join calls a block");
                }
                return unit.inside(child, input, BlockPaths.child(path, name));
            }

            @Override
            public int add(int a, int b) {
                return graph.emit(o -> new ForwardOp.Add(o, a, b));
            }

            @Override
            public int pointwise(String function, int input) {
                return graph.emit(o -> new ForwardOp.Pointwise(o, input, function));
            }

            @Override
            public int concat(List<Integer> inputs, int axis) {
                return graph.emit(o -> new ForwardOp.Concat(o, List.copyOf(inputs), axis));
            }

            @Override
            public int reshape(int input, List<ForwardCode.Dimension> shape) {
                List<ForwardOp.Size> sizes =
                        shape.stream()
                                .map(d -> new ForwardOp.Size(d.size(), d.value(), d.axis()))
                                .toList();
                return graph.emit(o -> new ForwardOp.Reshape(o, input, sizes));
            }
        };
    }
}
