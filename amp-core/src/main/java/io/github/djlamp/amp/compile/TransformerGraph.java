package io.github.djlamp.amp.compile;

import ai.djl.nn.Block;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.util.Pair;
import io.github.djlamp.amp.compile.GraphPlan.AttentionProduct;
import io.github.djlamp.amp.internal.DjlSeam;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.Precision;

/**
 * The compiled forms of DJL's {@link ScaledDotProductAttentionBlock} (self-attention on one input,
 * or with the mask offsets of DJL's BERT) and {@link TransformerEncoderBlock}: the operations
 * djl-amp's eager shadows of them make, in their order, each child as its own plan runs it. The
 * attention products take the precision the plan and their kernel checks decided, softmax runs in
 * fp32, and each residual sum is 16-bit only where both its operands are.
 */
final class TransformerGraph {

    private TransformerGraph() {}

    /** Whether {@code type} is one of the composites this class writes (exact classes only). */
    static boolean isComposite(Class<?> type) {
        return type == ScaledDotProductAttentionBlock.class
                || type == TransformerEncoderBlock.class;
    }

    /** DJL's TransformerEncoderBlock: attention, dropout, residual, norm, feed-forward, again. */
    static int encoder(
            ForwardGraphBuilder graph, TransformerEncoderBlock block, int in, String path) {
        Dropout[] dropouts = DjlSeam.encoderDropouts(block);
        int attended = add(graph, block, "selfAttention", in, path);
        int dropped = LeafGraph.dropout(graph, dropouts[0], attended);
        int residual = graph.emit(o -> new ForwardOp.Add(o, dropped, in));
        int normalized = add(graph, block, "attentionNorm", residual, path);
        int fed = add(graph, block, "outputBlock", normalized, path);
        int fedDropped = LeafGraph.dropout(graph, dropouts[1], fed);
        // DJL adds the block's input again, not the normalized value
        int outputResidual = graph.emit(o -> new ForwardOp.Add(o, fedDropped, in));
        return add(graph, block, "outputNorm", outputResidual, path);
    }

    /**
     * DJL's ScaledDotProductAttentionBlock on one input: self-attention, with the graph's mask
     * offsets added to the scaled scores where it has them (a 4-dimensional mask, as DJL adds it).
     */
    static int attention(
            ForwardGraphBuilder graph, ScaledDotProductAttentionBlock block, int in, String path) {
        int[] dimensions = DjlSeam.attentionDimensions(block);
        long embedding = dimensions[0];
        long heads = dimensions[1];
        long headSize = embedding / heads;
        boolean low = graph.lowPrecision() != Precision.FP32 && graph.plan().lowProducts(path);
        int keys = add(graph, block, "keyProjection", in, path);
        int queries = add(graph, block, "queryProjection", in, path);
        int values = add(graph, block, "valueProjection", in, path);
        int keyHeads = operand(graph, low, split(graph, keys, heads, headSize));
        int queryHeads = operand(graph, low, split(graph, queries, heads, headSize));
        int valueHeads = operand(graph, low, split(graph, values, heads, headSize));
        int transposed =
                graph.emit(o -> new ForwardOp.Permute(o, keyHeads, new long[] {0, 1, 3, 2}));
        int scores =
                product(
                        graph,
                        fallsBack(graph, low, path, AttentionProduct.SCORES),
                        queryHeads,
                        transposed);
        float factor = 1f / (float) Math.sqrt(headSize);
        int scaled = graph.emit(o -> new ForwardOp.Scale(o, scores, factor));
        int mask = graph.attentionMask();
        int masked = mask < 0 ? scaled : graph.emit(o -> new ForwardOp.Add(o, scaled, mask));
        int fp32Scores = graph.emit(o -> new ForwardOp.ToFp32(o, masked));
        int probabilities = graph.emit(o -> new ForwardOp.Softmax(o, fp32Scores, 3));
        int dropped = add(graph, block, "probabilityDropout", probabilities, path);
        int weights = operand(graph, low, dropped);
        int attended =
                product(
                        graph,
                        fallsBack(graph, low, path, AttentionProduct.WEIGHTED_VALUES),
                        weights,
                        valueHeads);
        int merged = graph.emit(o -> new ForwardOp.MergeHeads(o, attended, embedding));
        return add(graph, block, "resultProjection", merged, path);
    }

    private static boolean fallsBack(
            ForwardGraphBuilder graph, boolean low, String path, AttentionProduct product) {
        return low && !graph.plan().productRunsLow(path, product);
    }

    private static int split(ForwardGraphBuilder graph, int in, long heads, long headSize) {
        return graph.emit(o -> new ForwardOp.SplitHeads(o, in, heads, headSize));
    }

    /** A product's operand in the products' precision. */
    private static int operand(ForwardGraphBuilder graph, boolean low, int in) {
        return graph.emit(o -> low ? new ForwardOp.ToLow(o, in) : new ForwardOp.ToFp32(o, in));
    }

    /** A product in its operands' precision, or both cast to fp32 where its check refused it. */
    private static int product(ForwardGraphBuilder graph, boolean inFp32, int a, int b) {
        int left = inFp32 ? graph.emit(o -> new ForwardOp.ToFp32(o, a)) : a;
        int right = inFp32 ? graph.emit(o -> new ForwardOp.ToFp32(o, b)) : b;
        return graph.emit(o -> new ForwardOp.MatMul(o, left, right));
    }

    /** The child DJL added under {@code name}, on value {@code in}. */
    private static int add(
            ForwardGraphBuilder graph, Block block, String name, int in, String path) {
        for (Pair<String, Block> child : block.getChildren()) {
            if (child.getKey().replaceFirst("^[0-9]+", "").equals(name)) {
                return graph.add(child.getValue(), in, BlockPaths.child(path, child.getKey()));
            }
        }
        throw new NotCompilableException(path, "no child " + name + " in this DJL version");
    }
}
