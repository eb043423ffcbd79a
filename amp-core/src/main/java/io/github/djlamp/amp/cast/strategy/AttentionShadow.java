package io.github.djlamp.amp.cast.strategy;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.util.PairList;
import io.github.djlamp.amp.compile.GraphPlan;
import io.github.djlamp.amp.internal.DjlSeam;
import io.github.djlamp.amp.policy.Precision;
import java.util.Map;

/**
 * DJL's {@link ScaledDotProductAttentionBlock} run layer by layer, as PyTorch's autocast runs
 * attention: the four projections as their stages decide (16 bits by default), the two attention
 * products in the precision of the projections (each 16-bit product checked against fp32 at the
 * first use of its signature, and run in fp32 where it is wrong), and the softmax and its dropout
 * in fp32, so that no 16-bit array reaches DJL's softmax (which terminates the JVM on a bf16
 * array). The arithmetic is DJL's, step for step: in fp32 the result is bitwise DJL's.
 */
public final class AttentionShadow extends MirroredComposite {

    private static final String PRODUCTS = "(attention products)";

    private final long embeddingSize;
    private final long headCount;
    private final Block keyProjection;
    private final Block queryProjection;
    private final Block valueProjection;
    private final Block resultProjection;
    private final Block probabilityDropout;
    private final boolean lowProducts;
    // where the forward casts, each place's precisions decided once (a race only asks twice)
    private static final int KEYS = 0;
    private static final int QUERIES = 1;
    private static final int VALUES = 2;
    private static final int SCORES = 3;
    private static final int WEIGHTS = 4;
    private static final int FALLBACK = 5;
    private final InputPrecisions[] places = new InputPrecisions[6];
    // what the last forward's product checks decided, for a compiled graph of it
    private volatile boolean scoresRanLow = true;
    private volatile boolean valuesRanLow = true;
    private final String path;
    // the products' unit, as the precision summary and the arithmetic share name it
    private final String productsPath;

    /**
     * Makes the shadow of an attention block.
     *
     * @param original the user's block
     * @param shadows the shadows of its children, by the names DJL added them under
     * @param lowProducts whether the attention products compute in the compute precision (as the
     *     query projection does) or in fp32
     * @param path its path in the tree
     * @param release drops the handles to what each step consumed
     */
    public AttentionShadow(
            ScaledDotProductAttentionBlock original,
            Map<String, Block> shadows,
            boolean lowProducts,
            String path,
            StageRelease release) {
        super(original, release);
        int[] dimensions = DjlSeam.attentionDimensions(original);
        this.embeddingSize = dimensions[0];
        this.headCount = dimensions[1];
        this.keyProjection = child(original, shadows, "keyProjection");
        this.queryProjection = child(original, shadows, "queryProjection");
        this.valueProjection = child(original, shadows, "valueProjection");
        this.resultProjection = child(original, shadows, "resultProjection");
        this.probabilityDropout = child(original, shadows, "probabilityDropout");
        this.lowProducts = lowProducts;
        this.path = path;
        this.productsPath = path.isEmpty() ? PRODUCTS : path + " " + PRODUCTS;
    }

    @Override
    NDList forwardMirrored(
            StageStore store, NDList inputs, boolean training, PairList<String, Object> params) {
        long e = embeddingSize;
        long b = inputs.head().getShape().get(0);
        long n = headCount;
        long h = e / n;
        long from;
        long to;
        NDList keyInput;
        NDList queryInput;
        NDList valueInput;
        if (inputs.size() < 3) {
            from = inputs.head().getShape().get(1);
            to = from;
            keyInput = new NDList(inputs.head());
            queryInput = keyInput;
            valueInput = keyInput;
        } else {
            from = inputs.get(0).getShape().get(1);
            to = inputs.get(1).getShape().get(1);
            keyInput = new NDList(inputs.get(0));
            queryInput = new NDList(inputs.get(1));
            valueInput = new NDList(inputs.get(2));
        }
        NDArray mask =
                inputs.size() == 2 || inputs.size() == 4 ? inputs.get(inputs.size() - 1) : null;

        NDList keys = keyProjection.forward(store, keyInput, training, params);
        NDList queries = queryProjection.forward(store, queryInput, training, params);
        NDList values = valueProjection.forward(store, valueInput, training, params);
        NDList keyHeads = products(store, KEYS, heads(keys.head(), b, from, n, h));
        NDList queryHeads = products(store, QUERIES, heads(queries.head(), b, to, n, h));
        NDList valueHeads = products(store, VALUES, heads(values.head(), b, from, n, h));
        release.closeConsumed(new NDList(keys).addAll(queries).addAll(values), inputs);

        NDArray transposedKeys = keyHeads.head().transpose(0, 1, 3, 2);
        boolean scoresInFp32 =
                fallsBack(store, "attention scores", queryHeads.head(), transposedKeys, training);
        scoresRanLow = !scoresInFp32;
        NDArray scores = product(store, scoresInFp32, queryHeads.head(), transposedKeys, inputs);
        NDArray scaled = scores.mul(constant(scores, 1f / (float) Math.sqrt(h)));
        release.closeConsumed(
                new NDList(scores, transposedKeys).addAll(queryHeads).addAll(keyHeads), inputs);
        if (mask != null) {
            NDArray masked = scaled.add(maskOffset(mask, b, to, from));
            release.closeConsumed(new NDList(scaled), inputs);
            scaled = masked;
        }
        NDList fp32Scores = store.toFp32(new NDList(scaled), place(store, SCORES));
        NDArray probabilities = fp32Scores.head().softmax(3);
        release.closeConsumed(new NDList(scaled).addAll(fp32Scores), inputs);
        NDList dropped =
                probabilityDropout.forward(store, new NDList(probabilities), training, null);
        NDList weights = products(store, WEIGHTS, dropped);
        release.closeConsumed(new NDList(probabilities).addAll(dropped), inputs, weights);

        boolean valuesInFp32 =
                fallsBack(
                        store,
                        "attention-weighted values",
                        weights.head(),
                        valueHeads.head(),
                        training);
        valuesRanLow = !valuesInFp32;
        NDArray attended = product(store, valuesInFp32, weights.head(), valueHeads.head(), inputs);
        // both products in the compute precision, or the share counts them as fp32
        boolean lowBoth = lowProducts && !scoresInFp32 && !valuesInFp32;
        store.recordProduct(
                path,
                PRODUCTS,
                lowBoth ? store.computePrecision() : Precision.FP32,
                2 * 2 * b * n * to * from * h);
        NDArray embeddings = attended.transpose(0, 2, 1, 3).reshape(b, to, e);
        release.closeConsumed(
                new NDList(weights).addAll(valueHeads).addAll(new NDList(attended)), inputs);
        NDList projected = resultProjection.forward(store, new NDList(embeddings), training, null);
        release.closeConsumed(new NDList(embeddings), inputs, projected);
        return projected;
    }

    /**
     * Returns whether the last forward ran a product planned in 16 bits in them: false where its
     * kernel check found it wrong (true before any forward, and for products planned in fp32).
     *
     * @param product which product
     * @return false where it ran in fp32 instead
     */
    public boolean ranLow(GraphPlan.AttentionProduct product) {
        return product == GraphPlan.AttentionProduct.SCORES ? scoresRanLow : valuesRanLow;
    }

    /**
     * Whether a 16-bit product runs in fp32 instead: the kernel check of its signature found it
     * wrong. Products planned in fp32 are fp32 already.
     */
    private boolean fallsBack(
            StageStore store, String what, NDArray left, NDArray right, boolean training) {
        return lowProducts && !store.productRunsLow(productsPath, what, left, right, training);
    }

    /**
     * {@code left.matMul(right)} in the operands' precision, or in fp32 (the operands' fp32 copies
     * go at once: the product's backward keeps what it needs).
     */
    private NDArray product(
            StageStore store, boolean inFp32, NDArray left, NDArray right, NDList inputs) {
        if (!inFp32) {
            return left.matMul(right);
        }
        NDList fp32 = store.toFp32(new NDList(left, right), place(store, FALLBACK));
        NDArray result = fp32.get(0).matMul(fp32.get(1));
        release.closeConsumed(fp32, inputs, new NDList(left, right));
        return result;
    }

    /** (B, S, E) to (B, N, S, H), as DJL makes the heads. */
    private static NDArray heads(NDArray projection, long b, long s, long n, long h) {
        return projection.reshape(b, s, n, h).transpose(0, 2, 1, 3);
    }

    /** The operands of an attention product, in the products' precision. */
    private NDList products(StageStore store, int place, NDArray array) {
        return products(store, place, new NDList(array));
    }

    private NDList products(StageStore store, int place, NDList arrays) {
        InputPrecisions known = place(store, place);
        return lowProducts ? store.toCompute(arrays, known) : store.toFp32(arrays, known);
    }

    /** The precisions of the arrays cast at one place of the forward, decided once. */
    private InputPrecisions place(StageStore store, int place) {
        InputPrecisions known = places[place];
        if (known == null) {
            known = new InputPrecisions(store.backend());
            places[place] = known;
        }
        return known;
    }

    /** DJL's additive mask: 0 where the mask is 1, -100000 where it is 0; a 4-d mask as it is. */
    private static NDArray maskOffset(NDArray mask, long b, long to, long from) {
        if (mask.getShape().dimension() == 4) {
            return mask;
        }
        NDArray expanded = mask.reshape(b, 1, to, from);
        return expanded.toType(DataType.FLOAT32, false)
                .mul(constant(expanded, -1f))
                .add(constant(expanded, 1f))
                .mul(constant(expanded, -100000f));
    }

    /**
     * A scalar made by the engine, beside {@code array}. DJL's {@code create(float)} (which DJL's
     * own attention uses) wraps a Java buffer on the CPU that the engine does not copy; the
     * product's backward keeps it, and once the scope that made it closes (BERT's forward closes
     * its scopes before backward), a garbage collection frees it and backward reads freed memory.
     */
    private static NDArray constant(NDArray array, float value) {
        return array.getManager().full(new Shape(), value);
    }

    @Override
    public String toString() {
        return "attention(" + (path.isEmpty() ? "root" : path) + ")";
    }
}
