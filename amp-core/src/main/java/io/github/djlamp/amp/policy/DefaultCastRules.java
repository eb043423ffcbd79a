package io.github.djlamp.amp.policy;

import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Convolution;
import ai.djl.nn.convolutional.Deconvolution;
import ai.djl.nn.core.AbstractEmbedding;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.norm.LayerNorm;
import ai.djl.nn.recurrent.RecurrentBlock;
import ai.djl.nn.transformer.IdEmbedding;
import io.github.djlamp.amp.bytecode.KnownLambdas;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/**
 * The category djl-amp gives a block no override names: a table of rules, the first that matches
 * wins.
 *
 * <table>
 * <caption>Default cast rules, in order</caption>
 * <tr><th>block</th><th>category</th></tr>
 * <tr><td>{@code SequentialBlock} or {@code ParallelBlock}, or a subclass that keeps their
 *     forward (such as model-zoo {@code Mlp})</td><td>CONTAINER</td></tr>
 * <tr><td>DJL's {@code TransformerEncoderBlock}, {@code ScaledDotProductAttentionBlock}, {@code
 *     BertBlock} and {@code BertPretrainingBlock} ({@link KnownComposites}): run layer by layer, attention products in 16 bits and softmax in
 *     fp32</td><td>CONTAINER</td></tr>
 * <tr><td>a block implementing {@link LowPrecisionSafe}</td><td>LOW</td></tr>
 * <tr><td>{@code Convolution} (Conv1d, Conv2d, Conv3d)</td><td>LOW</td></tr>
 * <tr><td>{@code Deconvolution} (Conv1dTranspose, Conv2dTranspose)</td><td>FP32</td></tr>
 * <tr><td>{@code Linear}</td><td>LOW</td></tr>
 * <tr><td>{@code BatchNorm} (and GhostBatchNorm)</td><td>PASS_THROUGH</td></tr>
 * <tr><td>{@code Dropout}</td><td>PASS_THROUGH</td></tr>
 * <tr><td>{@code LayerNorm}</td><td>FP32</td></tr>
 * <tr><td>{@code LambdaBlock} whose function is verifiably DJL's activation, pooling or flatten
 *     (its factories' blocks, method references such as {@code Activation::relu}; read from the
 *     lambda's class file, never from the block's name: {@code KnownLambdas})</td>
 *     <td>PASS_THROUGH</td></tr>
 * <tr><td>any other {@code LambdaBlock}</td><td>FP32</td></tr>
 * <tr><td>embeddings ({@code AbstractEmbedding})</td><td>FP32</td></tr>
 * <tr><td>recurrent layers ({@code RecurrentBlock}: RNN, GRU, LSTM)</td><td>FP32 (the shadow
 *     tree runs those the engine's autocast supports under it: {@link #ENGINE_AUTOCAST})</td></tr>
 * <tr><td>other blocks of {@code ai.djl.nn.transformer}</td><td>FP32</td></tr>
 * <tr><td>a block whose forward djl-amp reads as safe on bf16 arrays ({@link ReadableBlocks}),
 *     every child safe in 16 bits</td><td>LOW (one unit)</td></tr>
 * <tr><td>a block whose forward djl-amp reads as safe, with a child that is not (DJL's YOLOv3:
 *     upsampling lambdas): its own code runs over its children, each child in its own
 *     category</td><td>CONTAINER</td></tr>
 * <tr><td>any other block with children (opaque composite)</td><td>FP32</td></tr>
 * <tr><td>any other leaf</td><td>FP32 (a TorchScript module: {@link #ENGINE_AUTOCAST})</td>
 *     </tr>
 * </table>
 *
 * <p>Subclasses match the rules of their superclasses, except for CONTAINER: a subclass of {@code
 * SequentialBlock} or {@code ParallelBlock} that declares its own {@code forward} or {@code
 * forwardInternal} may run its children differently, so it is an opaque composite.
 *
 * <p>The PASS_THROUGH rows were checked with DJL 0.35.1 (0.36.0 has the same code) and PyTorch
 * 2.7.1 on CPU: BatchNorm, GhostBatchNorm, Dropout and each listed lambda ran forward and backward,
 * training and inference, on bf16 input, returned bf16 and passed gradients back.
 */
public final class DefaultCastRules {

    /**
     * The treatment of a block whose forward the engine's own autocast runs (the engine layer names
     * such blocks: {@code AmpBackend.supportsEngineAutocast}); it overrides the FP32 these rules
     * give such a block, unless an override keeps it fp32.
     */
    public static final String ENGINE_AUTOCAST = "engine_autocast";

    /** Why a block of the user's own runs under the engine's own autocast. */
    public static final String READ_AROUND_ENGINE_CODE_REASON =
            "a block of your own whose forward djl-amp read, around engine code (DJL's LSTM or RNN, a"
                    + " TorchScript module): the engine's own autocast runs it whole, outputs cast to"
                    + " fp32";

    /** Why a block runs under the engine's own autocast, for reports and messages. */
    public static final String ENGINE_AUTOCAST_REASON =
            "engine code the engine's own autocast runs (a TorchScript module, DJL's LSTM or RNN):"
                    + " each operation in the precision autocast gives it, outputs cast to fp32";

    private static final String TRANSFORMER_PACKAGE = "ai.djl.nn.transformer";

    private static final Rule AUTHORS_WORD =
            new Rule(
                    "declared LowPrecisionSafe by its author",
                    b -> b instanceof LowPrecisionSafe,
                    CastCategory.LOW);

    /**
     * A readable block with a child that is not safe in 16 bits: its code runs over the children's
     * shadows ({@link #isReadOverChildren}); after the rule that makes a readable block with safe
     * children one unit.
     */
    private static final Rule READ_OVER_CHILDREN =
            new Rule(
                    "a block whose forward djl-amp read: its own code runs over its children, each"
                            + " in its own precision",
                    ReadableBlocks::isReadableWithoutViews,
                    CastCategory.CONTAINER);

    private static final List<Rule> RULES =
            List.of(
                    new Rule(
                            "SequentialBlock or ParallelBlock: runs its children one by one",
                            DefaultCastRules::isPlainContainer,
                            CastCategory.CONTAINER),
                    new Rule(
                            "DJL transformer block: run layer by layer, attention products in 16"
                                    + " bits, softmax in fp32",
                            KnownComposites::isMirrored,
                            CastCategory.CONTAINER),
                    AUTHORS_WORD,
                    new Rule(
                            "convolution: on autocast's lower-precision list",
                            b -> b instanceof Convolution,
                            CastCategory.LOW),
                    // Transposed convolution is on autocast's lower-precision list too, but DJL's
                    // PyTorch engine does not implement it (PtNDArrayEx.deconvolution
                    // throws UnsupportedOperationException) and no engine has been checked with
                    // 16-bit input: kept in fp32 until it can be tested. Override to LOW to try.
                    new Rule(
                            "transposed convolution: not verified in 16 bits",
                            b -> b instanceof Deconvolution,
                            CastCategory.FP32),
                    new Rule(
                            "linear layer: on autocast's lower-precision list",
                            b -> b instanceof Linear,
                            CastCategory.LOW),
                    new Rule(
                            "batch normalization: its fp32 statistics accept 16-bit input",
                            b -> b instanceof BatchNorm,
                            CastCategory.PASS_THROUGH),
                    new Rule(
                            "dropout: element-wise",
                            b -> b instanceof Dropout,
                            CastCategory.PASS_THROUGH),
                    new Rule(
                            "layer normalization: numerically sensitive",
                            b -> b instanceof LayerNorm,
                            CastCategory.FP32),
                    new Rule(
                            "DJL activation, pooling or reshape lambda",
                            b ->
                                    b instanceof LambdaBlock
                                            && KnownLambdas.isPassThrough((LambdaBlock) b),
                            CastCategory.PASS_THROUGH),
                    new Rule(
                            "lambda of unknown content: may call softmax, unsafe on bf16 arrays",
                            b -> b instanceof LambdaBlock,
                            CastCategory.FP32),
                    new Rule(
                            "embedding: a lookup, nothing to gain in 16 bits",
                            b -> b instanceof AbstractEmbedding || b instanceof IdEmbedding,
                            CastCategory.FP32),
                    new Rule(
                            "recurrent layer the engine's autocast does not run: kept in fp32",
                            b -> b instanceof RecurrentBlock,
                            CastCategory.FP32),
                    new Rule(
                            "transformer block: uses softmax and layer normalization",
                            DefaultCastRules::isTransformerBlock,
                            CastCategory.FP32),
                    new Rule(
                            "a block whose forward djl-amp read: it calls its children and array"
                                    + " operations safe in 16 bits only",
                            DefaultCastRules::isReadableAndSafeInside,
                            CastCategory.LOW),
                    READ_OVER_CHILDREN,
                    new Rule(
                            "opaque composite: djl-amp cannot descend into it",
                            b -> !b.getChildren().isEmpty(),
                            CastCategory.FP32),
                    new Rule("unknown leaf", b -> true, CastCategory.FP32));

    private DefaultCastRules() {}

    /**
     * A block of a user's class whose own forward reads as safe on bf16 arrays ({@link
     * ReadableBlocks}) and whose children are all safe in 16 bits on djl-amp's own rules; one with
     * a child that is not (an LSTM, a lambda of unknown content) stays fp32, as any opaque block.
     */
    private static boolean isReadableAndSafeInside(Block block) {
        return whyNotRead(block) == null;
    }

    /**
     * Whether djl-amp runs {@code block}'s own code over its children, each child planned on its
     * own: a block whose forward it reads as safe on bf16 arrays ({@link ReadableBlocks}), of a
     * user's class or of DJL's (YOLOv3), holding a child that is not safe in 16 bits (where every
     * child is, the block is one 16-bit unit instead).
     *
     * @param block a block
     * @return true when the table's first rule that matches it is that one
     */
    public static boolean isReadOverChildren(Block block) {
        return ruleFor(block) == READ_OVER_CHILDREN;
    }

    /**
     * Whether the engine's own autocast may run {@code block} whole: a block of the user's own
     * class whose forward djl-amp reads as safe on bf16 arrays ({@link ReadableBlocks}), holding
     * engine code ({@code engineCode}: DJL's LSTM, a TorchScript module) that a 16-bit unit cannot
     * run (d2l-java's {@code RNNModel}: one-hot encoding, an LSTM and a linear layer), with every
     * other block it reaches safe in 16 bits. Autocast casts each operation's operands as it runs,
     * so the arrays its code makes (the one-hot input) meet the 16-bit weights without a type
     * mismatch; its code reads no array's type, so no 16-bit array it sees reaches DJL's traps.
     *
     * @param block a block
     * @param engineCode the blocks the engine's autocast runs
     * @return true for such a block
     */
    public static boolean isReadableAroundEngineCode(
            Block block, java.util.function.Predicate<Block> engineCode) {
        return reaches(block, engineCode)
                && ReadableBlocks.isReadable(block)
                && hazardAmongChildren(block, (b, p) -> engineCode.test(b)) == null;
    }

    /** The first bf16 hazard among {@code block}'s children, with {@code trusted} counted safe. */
    private static String hazardAmongChildren(
            Block block, java.util.function.BiPredicate<Block, String> trusted) {
        for (ai.djl.util.Pair<String, Block> child : block.getChildren()) {
            String hazard = bf16HazardIn(child.getValue(), child.getKey(), trusted);
            if (hazard != null) {
                return hazard;
            }
        }
        return null;
    }

    private static boolean reaches(Block block, java.util.function.Predicate<Block> engineCode) {
        for (ai.djl.util.Pair<String, Block> child : block.getChildren()) {
            if (engineCode.test(child.getValue()) || reaches(child.getValue(), engineCode)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Returns why a block of the user's own class does not compute in 16 bits on djl-amp's reading
     * of its forward, for the fallback WARN: what its forward calls that djl-amp does not know safe
     * on bf16 arrays, or the child that is not safe in 16 bits; null when it is read so.
     *
     * @param block a block
     * @return e.g. {@code "its forward calls ai.djl.ndarray.NDArray.softmax"}, or null
     */
    public static String whyNotRead(Block block) {
        String why = ReadableBlocks.whyNot(block);
        if (why != null) {
            return why;
        }
        String hazard = hazardAmongChildren(block, (b, p) -> false);
        return hazard == null ? null : "it reaches " + hazard;
    }

    /**
     * Returns the default category of a block, before overrides and before the compute precision is
     * known (LOW stays LOW here even for the float32 policy).
     *
     * @param block a block
     * @return its default category
     */
    public static CastCategory categoryOf(Block block) {
        return ruleFor(block).category;
    }

    /**
     * Returns why {@link #categoryOf(Block)} gives what it gives, for reports and messages.
     *
     * @param block a block
     * @return the description of the first rule that matches it
     */
    public static String reasonFor(Block block) {
        return ruleFor(block).reason;
    }

    /**
     * Returns whether djl-amp's own rules, on nobody's word, let a block see 16-bit arrays: true
     * for the blocks of the table that are not FP32 (DJL's convolutions, linear layers, BatchNorm,
     * Dropout, known lambdas, and the plain containers, whose children are judged one by one);
     * false for a block that computes in 16 bits only because its author marked it {@link
     * LowPrecisionSafe} or a policy trusts it ({@link CastCategory#TRUSTED}).
     *
     * @param block a block
     * @return whether the table's first rule that matches it, the author's word left out, is not
     *     FP32
     */
    public static boolean knowsSafeIn16Bits(Block block) {
        for (Rule rule : RULES) {
            if (rule != AUTHORS_WORD && rule.matches.test(block)) {
                return rule.category != CastCategory.FP32;
            }
        }
        throw new AssertionError("the last rule matches every block");
    }

    /**
     * Returns whether a ParallelBlock's join function is one djl-amp knows to be safe on 16-bit
     * branch outputs (the model zoo's ResNetV1, GoogLeNet and SqueezeNet joins); any other join is
     * code of unknown content, like an unknown lambda.
     *
     * @param block a ParallelBlock
     * @return true for a known join
     */
    public static boolean hasKnownJoin(ParallelBlock block) {
        return KnownLambdas.isKnownJoin(block);
    }

    /**
     * Returns what makes running {@code block} as one bf16 unit unsafe, or null when nothing
     * djl-amp can see does: every block it reaches must be one djl-amp runs in 16 bits by default
     * (a convolution, a linear layer, BatchNorm, a known lambda, a block marked {@link
     * LowPrecisionSafe}), and every ParallelBlock join it reaches must be a known one. Under bf16,
     * DJL's PyTorch engine terminates the JVM when softmax or logSoftmax meet a bf16 array, and
     * code of unknown content may call them.
     *
     * @param block the block an override or a default would run in 16 bits
     * @param path its path, for the message
     * @return e.g. {@code "'01SequentialBlock/02LambdaBlock' (ai.djl.nn.LambdaBlock): lambda of
     *     unknown content..."}, or null
     */
    public static String bf16HazardIn(Block block, String path) {
        return bf16HazardIn(block, path, (b, p) -> false);
    }

    /**
     * Returns what makes running {@code block} as one bf16 unit unsafe, as {@link
     * #bf16HazardIn(Block, String)} does, with the blocks the user vouches for counted as {@link
     * LowPrecisionSafe} ones. Inside a block someone vouches for (either way), a lambda or a
     * ParallelBlock join written in that block's code (its class, a class nested in it, or a
     * superclass outside DJL) is the block's own code, under the same promise: d2l-java's {@code
     * Residual} writes both in its constructor. A function written elsewhere is still a hazard.
     *
     * @param block the block a policy would run in bf16 as one unit
     * @param path its path, for the message
     * @param trusted which blocks (by block and path) the user vouches for
     * @return a description of the first hazard found, or null when there is none
     */
    public static String bf16HazardIn(
            Block block, String path, java.util.function.BiPredicate<Block, String> trusted) {
        return bf16HazardIn(block, path, trusted, List.of());
    }

    /**
     * The walk of {@link #bf16HazardIn(Block, String, java.util.function.BiPredicate)}: {@code
     * vouched} are the classes of the blocks above {@code block} someone vouches for, whose own
     * lambdas and joins (written in their code) are under the same promise.
     */
    private static String bf16HazardIn(
            Block block,
            String path,
            java.util.function.BiPredicate<Block, String> trusted,
            List<Class<?>> vouched) {
        boolean container = isPlainContainer(block) || KnownComposites.isMirrored(block);
        boolean vouchedFor =
                !container && (block instanceof LowPrecisionSafe || trusted.test(block, path));
        if (!container
                && !vouchedFor
                && categoryOf(block) == CastCategory.FP32
                && !(block instanceof LambdaBlock
                        && KnownLambdas.lambdaWrittenBy((LambdaBlock) block, vouched))) {
            return describe(block, path, reasonFor(block));
        }
        if (container
                && block instanceof ParallelBlock
                && !hasKnownJoin((ParallelBlock) block)
                && !KnownLambdas.joinWrittenBy((ParallelBlock) block, vouched)) {
            return describe(
                    block,
                    path,
                    vouched.isEmpty()
                            ? "its join function is code of unknown content"
                            : "its join function is code of unknown content, written outside the"
                                    + " vouched-for block's class");
        }
        List<Class<?>> inner = vouched;
        if (vouchedFor) {
            inner = new ArrayList<>(vouched);
            inner.add(block.getClass());
        }
        for (ai.djl.util.Pair<String, Block> child : block.getChildren()) {
            String hazard =
                    bf16HazardIn(
                            child.getValue(),
                            BlockPaths.child(path, child.getKey()),
                            trusted,
                            inner);
            if (hazard != null) {
                return hazard;
            }
        }
        return null;
    }

    private static String describe(Block block, String path, String reason) {
        return (path.isEmpty() ? "the root block" : "'" + path + "'")
                + " ("
                + block.getClass().getName()
                + "): "
                + reason;
    }

    private static Rule ruleFor(Block block) {
        for (Rule rule : RULES) {
            if (rule.matches.test(block)) {
                return rule;
            }
        }
        throw new AssertionError("the last rule matches every block");
    }

    private static boolean isPlainContainer(Block block) {
        Class<?> base;
        if (block instanceof SequentialBlock) {
            base = SequentialBlock.class;
        } else if (block instanceof ParallelBlock) {
            base = ParallelBlock.class;
        } else {
            return false;
        }
        for (Class<?> c = block.getClass(); c != base; c = c.getSuperclass()) {
            for (Method method : c.getDeclaredMethods()) {
                String name = method.getName();
                if ("forward".equals(name) || "forwardInternal".equals(name)) {
                    return false;
                }
            }
        }
        return true;
    }

    private static boolean isTransformerBlock(Block block) {
        for (Class<?> c = block.getClass(); c != null; c = c.getSuperclass()) {
            if (TRANSFORMER_PACKAGE.equals(c.getPackageName())) {
                return true;
            }
        }
        return false;
    }

    /** One row of the table. */
    private static final class Rule {
        private final String reason;
        private final Predicate<Block> matches;
        private final CastCategory category;

        Rule(String reason, Predicate<Block> matches, CastCategory category) {
            this.reason = reason;
            this.matches = matches;
            this.category = category;
        }
    }
}
