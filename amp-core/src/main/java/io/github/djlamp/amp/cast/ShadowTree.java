package io.github.djlamp.amp.cast;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.BertPretrainingBlock;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.cast.checkpoint.CheckpointPlan;
import io.github.djlamp.amp.cast.checkpoint.CheckpointTape;
import io.github.djlamp.amp.cast.checkpoint.CheckpointedSegment;
import io.github.djlamp.amp.cast.strategy.AttentionShadow;
import io.github.djlamp.amp.cast.strategy.AutocastStage;
import io.github.djlamp.amp.cast.strategy.BertPretrainingShadow;
import io.github.djlamp.amp.cast.strategy.BertShadow;
import io.github.djlamp.amp.cast.strategy.ReadBlockShadow;
import io.github.djlamp.amp.cast.strategy.TransformerEncoderShadow;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.internal.DjlSeam;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.BlockPlan;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.LowPrecisionSafe;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;

/**
 * Builds the shadow of a block tree: the same leaves, each inside a {@link PrecisionStage}, under
 * copies of DJL's containers. The shadow shares every block and parameter with the original and is
 * only ever used for forward. What each block becomes is read from the tree's {@link ModelPlan}, as
 * the precision summary reads it: nothing here decides a block's treatment again.
 */
final class ShadowTree {

    private ShadowTree() {}

    /**
     * Builds the shadow of {@code root} under a concrete policy.
     *
     * @param release whether the shadow drops its handles to the intermediates it has consumed
     */
    static Block build(Block root, PrecisionPolicy policy, IntermediateRelease release) {
        return build(
                ModelPlan.of(policy, root, AmpBackends::supportEngineAutocast),
                release,
                CheckpointPlan.NONE,
                null);
    }

    /**
     * Builds the shadow of a tree as {@code blocks} plans it under a concrete policy, with the
     * segments of {@code plan} recording on {@code tape}.
     *
     * @throws AmpException when the policy runs a SequentialBlock that holds segments as one stage,
     *     or runs a block in bf16 that reaches code which may call softmax
     */
    static Block build(
            ModelPlan blocks,
            IntermediateRelease release,
            CheckpointPlan plan,
            CheckpointTape tape) {
        return build(blocks, release, plan, tape, null);
    }

    /**
     * Builds the shadow of a tree as {@link #build(ModelPlan, IntermediateRelease, CheckpointPlan,
     * CheckpointTape)} does, with the runs of SequentialBlock children djl-amp can compile made
     * into {@code compiling}'s compiled runs.
     *
     * @param compiling where the compiled runs go, or null to compile nothing
     */
    static Block build(
            ModelPlan blocks,
            IntermediateRelease release,
            CheckpointPlan plan,
            CheckpointTape tape,
            CompiledRuns compiling) {
        return build(blocks, release, plan, tape, compiling, new ConcurrentHashMap<>());
    }

    /**
     * Builds the shadow of a tree as {@link #build(ModelPlan, IntermediateRelease, CheckpointPlan,
     * CheckpointTape, CompiledRuns)} does, its engine-autocast stages putting into {@code
     * fallbacks} the reason each turns to fp32 for good, by its path.
     */
    static Block build(
            ModelPlan blocks,
            IntermediateRelease release,
            CheckpointPlan plan,
            CheckpointTape tape,
            CompiledRuns compiling,
            Map<String, String> fallbacks) {
        PrecisionPolicy policy = blocks.getPolicy();
        Builder builder = new Builder(blocks, release, plan, tape, compiling, fallbacks);
        Block shadow = builder.shadowOf(blocks.getRoot(), "");
        if (builder.segmentsBuilt != plan.segmentCount()) {
            List<String> missing = new ArrayList<>(plan.sequences());
            missing.removeAll(builder.sequencesBuilt);
            throw new AmpException(
                    "checkpointing="
                            + plan.setting()
                            + " places segments inside "
                            + missing
                            + ", which the policy "
                            + policy
                            + " runs as one stage (not as a container): checkpoint that stage as a"
                            + " whole (Checkpointing.blocks(\"path:...\")), or remove the policy's"
                            + " override of it");
        }
        return shadow;
    }

    /** One build: the settings, and the segments made so far. */
    private static final class Builder {
        private final ModelPlan blocks;
        private final IntermediateRelease release;
        private final CheckpointPlan plan;
        private final CheckpointTape tape;
        private final CompiledRuns compiling;
        private final Map<String, String> fallbacks;
        private final List<String> sequencesBuilt = new ArrayList<>();
        private int segmentsBuilt;

        Builder(
                ModelPlan blocks,
                IntermediateRelease release,
                CheckpointPlan plan,
                CheckpointTape tape,
                CompiledRuns compiling,
                Map<String, String> fallbacks) {
            this.blocks = blocks;
            this.fallbacks = fallbacks;
            this.release = release;
            this.plan = plan;
            this.tape = tape;
            this.compiling = compiling;
        }

        Block shadowOf(Block block, String path) {
            BlockPlan planned = blocks.get(path);
            if (planned == null || planned.getBlock() != block) {
                throw new IllegalStateException(
                        "The plan has no entry for '"
                                + path
                                + "' as the tree holds it now: it was made from the tree before a"
                                + " change, and a shadow is built only from the plan of the tree"
                                + " as it is");
            }
            return ShadowTree.shadowOf(block, planned, blocks.getPolicy(), release, this);
        }

        /**
         * The shadow children of a SequentialBlock, with its segments' stages grouped.
         *
         * @throws AmpException when segments would hide the intermediate outputs the block returns
         */
        List<Block> sequenceOf(
                Block block, String path, List<Block> children, boolean returnsIntermediate) {
            List<CheckpointPlan.Group> groups = plan.groupsOf(path);
            if (groups.isEmpty()) {
                return children;
            }
            if (returnsIntermediate) {
                throw new AmpException(
                        "checkpointing="
                                + plan.setting()
                                + " places segments inside '"
                                + path
                                + "', a SequentialBlock that returns the output of every child"
                                + " (setReturnIntermediate(true)): a segment returns only its last"
                                + " child's output. Checkpoint blocks inside its children instead"
                                + " (Checkpointing.blocks(\"path:...\")), or the block as a whole"
                                + " from its parent");
            }
            List<Block> originals = new ArrayList<>();
            List<String> paths = new ArrayList<>();
            for (Pair<String, Block> child : block.getChildren()) {
                originals.add(child.getValue());
                paths.add(BlockPaths.child(path, child.getKey()));
            }
            List<Block> result = new ArrayList<>();
            int next = 0;
            for (CheckpointPlan.Group group : groups) {
                result.addAll(children.subList(next, group.from()));
                String description =
                        group.to() - group.from() == 1
                                ? paths.get(group.from())
                                : paths.get(group.from()) + " .. " + paths.get(group.to() - 1);
                result.add(
                        new CheckpointedSegment(
                                new ArrayList<>(children.subList(group.from(), group.to())),
                                new ArrayList<>(originals.subList(group.from(), group.to())),
                                description,
                                release::chain,
                                tape));
                next = group.to();
            }
            result.addAll(children.subList(next, children.size()));
            sequencesBuilt.add(path);
            segmentsBuilt += groups.size();
            return result;
        }
    }

    private static Block shadowOf(
            Block block,
            BlockPlan planned,
            PrecisionPolicy policy,
            IntermediateRelease release,
            Builder builder) {
        String path = planned.getPath();
        CastCategory category = planned.getCategory();
        if (planned.getStrategy() == BlockPlan.Strategy.ENGINE_AUTOCAST) {
            requireAutocastOverrideSafe(block, path, policy);
            return new AutocastStage(block, path, release, builder.fallbacks::put);
        }
        if (planned.getStrategy() == BlockPlan.Strategy.STAGE) {
            requireBf16Safe(block, path, category, planned.getBf16Hazard(), policy);
            String vouchedBy =
                    category != CastCategory.LOW
                            ? null
                            : policy.trusts(block, path)
                                    ? "the policy trusts it"
                                    : block instanceof LowPrecisionSafe
                                            ? "it implements LowPrecisionSafe"
                                            : null;
            PrecisionStage stage =
                    new PrecisionStage(
                            GcSafeLambdas.replacing(block),
                            category,
                            path,
                            release,
                            TrustBreadcrumb.of(planned, policy),
                            vouchedBy);
            if (builder.compiling != null) {
                builder.compiling.stage(path, stage);
            }
            return stage;
        }
        List<Block> children = new ArrayList<>();
        Map<String, Block> named = new LinkedHashMap<>();
        Map<Block, Block> byChild = new IdentityHashMap<>();
        for (Pair<String, Block> child : block.getChildren()) {
            String childPath = BlockPaths.child(path, child.getKey());
            Block shadow = builder.shadowOf(child.getValue(), childPath);
            children.add(shadow);
            named.put(child.getKey(), shadow);
            byChild.put(child.getValue(), shadow);
        }
        if (planned.getStrategy() == BlockPlan.Strategy.READ) {
            return new ReadBlockShadow(block, byChild, path);
        }
        if (block instanceof ScaledDotProductAttentionBlock) {
            AttentionShadow attention =
                    new AttentionShadow(
                            (ScaledDotProductAttentionBlock) block,
                            byName(named),
                            planned.hasLowProducts(),
                            path,
                            release);
            if (builder.compiling != null) {
                builder.compiling.attention(path, attention);
            }
            return attention;
        }
        if (block instanceof BertBlock) {
            return new BertShadow(
                    (BertBlock) block,
                    byName(named),
                    encoderStack(block, path, byChild, builder.compiling),
                    path,
                    release);
        }
        if (block instanceof BertPretrainingBlock) {
            Block bert = null;
            for (Pair<String, Block> child : block.getChildren()) {
                bert = "Bert".equals(addedName(child.getKey())) ? child.getValue() : bert;
            }
            return new BertPretrainingShadow(
                    (BertPretrainingBlock) block, (BertBlock) bert, byName(named), path, release);
        }
        if (block instanceof TransformerEncoderBlock) {
            return new TransformerEncoderShadow(
                    (TransformerEncoderBlock) block, byName(named), path, release);
        }
        if (block instanceof SequentialBlock) {
            boolean intermediate = ((SequentialBlock) block).isReturnIntermediate();
            List<Block> sequence = builder.sequenceOf(block, path, children, intermediate);
            if (builder.compiling != null && !intermediate) {
                sequence = builder.compiling.group(block, path, sequence);
            }
            return new Sequential(release, intermediate).addAll(sequence);
        }
        if (block instanceof ParallelBlock) {
            ParallelBlock parallel = (ParallelBlock) block;
            if (planned.hasFp32Join()) {
                children = withFp32Outputs(children, path, release);
            }
            return new Parallel(joinOf(parallel), children, release);
        }
        throw new AmpException(
                "The policy treats '"
                        + path
                        + "' ("
                        + block.getClass().getName()
                        + ") as a container, but djl-amp can only descend into SequentialBlock and"
                        + " ParallelBlock; override it as fp32, low or pass_through instead");
    }

    /**
     * BERT's encoder blocks as one compiled run, or null where nothing is compiled or one of them
     * cannot be.
     */
    private static Block encoderStack(
            Block bert, String path, Map<Block, Block> shadows, CompiledRuns compiling) {
        if (compiling == null) {
            return null;
        }
        List<Pair<String, Block>> encoders = new ArrayList<>();
        List<Block> encoderShadows = new ArrayList<>();
        for (Pair<String, Block> child : bert.getChildren()) {
            if (addedName(child.getKey()).startsWith("transformer_")) {
                encoders.add(new Pair<>(BlockPaths.child(path, child.getKey()), child.getValue()));
                encoderShadows.add(shadows.get(child.getValue()));
            }
        }
        return encoders.isEmpty() ? null : compiling.encoderStack(path, encoders, encoderShadows);
    }

    /** The shadows of a block's children by the names DJL gave them, without their index prefix. */
    private static Map<String, Block> byName(Map<String, Block> shadows) {
        Map<String, Block> named = new LinkedHashMap<>();
        for (Map.Entry<String, Block> e : shadows.entrySet()) {
            named.put(addedName(e.getKey()), e.getValue());
        }
        return named;
    }

    /** The name a child was added under: DJL prefixes it with its position, two digits. */
    private static String addedName(String childName) {
        return childName.replaceFirst("^[0-9]+", "");
    }

    private static List<Block> withFp32Outputs(
            List<Block> branches, String path, IntermediateRelease release) {
        List<Block> cast = new ArrayList<>(branches.size());
        for (Block branch : branches) {
            Block toFp32 =
                    new PrecisionStage(
                            Blocks.identityBlock(),
                            CastCategory.FP32,
                            path + " (join input)",
                            release);
            cast.add(new Sequential(release).add(branch).add(toFp32));
        }
        return cast;
    }

    /**
     * Under bf16, only blocks djl-amp knows to be safe may see bf16 arrays: DJL's PyTorch engine
     * terminates the JVM when softmax, logSoftmax or backward meet one, and an overridden block of
     * unknown content may call them. An override on a container reaches everything inside it, so
     * all of it is checked, joins included ({@link BlockPlan#getBf16Hazard()}).
     */
    /** "The policy P runs 'path' (class)": how a refusal of a plan begins. */
    private static String runs(PrecisionPolicy policy, String path, Block block) {
        return "The policy "
                + policy
                + " runs '"
                + (path.isEmpty() ? "the root block" : path)
                + "' ("
                + block.getClass().getName()
                + ")";
    }

    /**
     * The {@code autocast} override runs code djl-amp cannot read on the arrays the engine's
     * autocast makes; in bf16 DJL's PyTorch engine terminates the JVM where such code calls softmax
     * or logSoftmax on one (it cannot express bf16), and attention code does.
     */
    private static void requireAutocastOverrideSafe(
            Block block, String path, PrecisionPolicy policy) {
        if (policy.autocasts(block, path)
                && policy.getComputePrecision() == Precision.BF16
                && !(block instanceof LowPrecisionSafe)) {
            throw new AmpException(
                    runs(policy, path, block)
                            + " whole under the engine's bfloat16 autocast, on code djl-amp cannot"
                            + " read: where that code calls softmax or logSoftmax on a bf16 array"
                            + " (attention does), DJL's PyTorch engine terminates the JVM ("
                            + DjlSeam.testedDjlVersions()
                            + "). Use the override under mixed_float16, or let the block's class"
                            + " implement io.github.djlamp.amp.policy.LowPrecisionSafe if its code"
                            + " calls neither and hands no array's getDataType() to DJL.");
        }
    }

    private static void requireBf16Safe(
            Block block,
            String path,
            CastCategory category,
            String hazard,
            PrecisionPolicy policy) {
        if (hazard == null) {
            return;
        }
        boolean marked = block instanceof LowPrecisionSafe;
        if (marked || policy.trusts(block, path)) {
            // the word is given already: never suggest giving it again
            throw new AmpException(
                    runs(policy, path, block)
                            + " in bfloat16 on the word of "
                            + (marked ? "its author (LowPrecisionSafe)" : "the policy (trusted)")
                            + ", which covers the block's own code, the lambdas and joins its"
                            + " class writes included, but it reaches "
                            + hazard
                            + ": if that calls softmax or logSoftmax on a bf16 array, DJL's PyTorch"
                            + " engine terminates the JVM ("
                            + DjlSeam.testedDjlVersions()
                            + "). Keep the block in fp32 (class:"
                            + block.getClass().getName()
                            + "=fp32), or use mixed_float16, where it may run in 16 bits.");
        }
        throw new AmpException(
                runs(policy, path, block)
                        + " as "
                        + category.configName()
                        + " in bfloat16, which reaches "
                        + hazard
                        + ": if it calls softmax or logSoftmax on a bf16 array, DJL's PyTorch"
                        + " engine terminates the JVM ("
                        + DjlSeam.testedDjlVersions()
                        + "). Remove the override, or use"
                        + " mixed_float16, where this block may run in 16 bits, or, for your own"
                        + " block, implement io.github.djlamp.amp.policy.LowPrecisionSafe (for a"
                        + " class you cannot change, vouch for it in the policy: class:"
                        + block.getClass().getName()
                        + "=trusted).");
    }

    private static Function<List<NDList>, NDList> joinOf(ParallelBlock block) {
        try {
            return DjlSeam.parallelJoin(block);
        } catch (AmpException e) {
            throw new AmpException(
                    "Cannot read the join function of a ParallelBlock, which DJL keeps in a"
                            + " private field. With this DJL version, override ParallelBlocks as"
                            + " fp32 in the precision policy. "
                            + e.getMessage(),
                    e);
        }
    }

    /**
     * A shadow SequentialBlock: initialized through the original, never by itself; drops its handle
     * to each child's output once the next child has consumed it, unless, as the original is set to
     * ({@link SequentialBlock#setReturnIntermediate}), it returns every child's output.
     */
    private static final class Sequential extends SequentialBlock {
        private final IntermediateRelease release;

        Sequential(IntermediateRelease release) {
            this(release, false);
        }

        Sequential(IntermediateRelease release, boolean returnIntermediate) {
            this.release = release;
            setReturnIntermediate(returnIntermediate);
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore parameterStore,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            if (isReturnIntermediate()) {
                return super.forwardInternal(parameterStore, inputs, training, params);
            }
            return release.chain(children.values(), parameterStore, inputs, training, null);
        }

        /** With labels, each child runs its forward with labels, as in DJL's SequentialBlock. */
        @Override
        protected NDList forwardInternal(
                ParameterStore parameterStore,
                NDList data,
                NDList labels,
                PairList<String, Object> params) {
            if (isReturnIntermediate()) {
                return super.forwardInternal(parameterStore, data, labels, params);
            }
            return release.chain(children.values(), parameterStore, data, labels, true, null);
        }

        @Override
        public boolean isInitialized() {
            return true;
        }

        @Override
        public void initialize(NDManager manager, DataType dataType, Shape... inputShapes) {}
    }

    /**
     * A shadow ParallelBlock with the original's join function; drops its handles to the branch
     * outputs and the join's intermediates once joined.
     */
    private static final class Parallel extends ParallelBlock {
        private final Function<List<NDList>, NDList> join;
        private final IntermediateRelease release;

        Parallel(
                Function<List<NDList>, NDList> join,
                List<Block> children,
                IntermediateRelease release) {
            super(join, children);
            this.join = join;
            this.release = release;
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore parameterStore,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            List<NDList> branches = new ArrayList<>(children.size());
            for (Block child : children.values()) {
                branches.add(child.forward(parameterStore, inputs, training, params));
            }
            return release.join(join, branches, inputs);
        }

        /** With labels, each branch runs its forward with labels, as in DJL's ParallelBlock. */
        @Override
        protected NDList forwardInternal(
                ParameterStore parameterStore,
                NDList data,
                NDList labels,
                PairList<String, Object> params) {
            List<NDList> branches = new ArrayList<>(children.size());
            for (Block child : children.values()) {
                branches.add(child.forward(parameterStore, data, labels, params));
            }
            return release.join(join, branches, data);
        }

        @Override
        public boolean isInitialized() {
            return true;
        }

        @Override
        public void initialize(NDManager manager, DataType dataType, Shape... inputShapes) {}
    }
}
