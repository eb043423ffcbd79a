package io.github.djlamp.amp.cast;

import ai.djl.Device;
import ai.djl.nn.Block;
import ai.djl.util.Pair;
import io.github.djlamp.amp.cast.strategy.AttentionShadow;
import io.github.djlamp.amp.compile.ForwardGraphBuilder;
import io.github.djlamp.amp.compile.GraphPlan;
import io.github.djlamp.amp.compile.NotCompilableException;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The compiled forward of one shadow tree (one device): while the tree is built, each
 * SequentialBlock's longest runs of children that djl-amp can compile become {@link CompiledRun}s,
 * and each block outside them is noted with why it runs eagerly; once built, the tree says so once.
 */
final class CompiledRuns {

    private static final Logger LOG = LoggerFactory.getLogger(MixedPrecisionBlock.class);

    /** The fewest operations a run must have to be worth one native call. */
    private static final int FEWEST_OPERATIONS = 2;

    /** The most blocks the report names. */
    private static final int NAMED_REASONS = 8;

    private final IntermediateRelease release;
    private final AmpBackend backend;
    private final Map<String, PrecisionStage> stages = new ConcurrentHashMap<>();
    private final Map<String, AttentionShadow> attentions = new ConcurrentHashMap<>();
    private final GraphPlan decided;
    private final Map<String, String> eager = new LinkedHashMap<>();
    private final List<CompiledRun> runs = new ArrayList<>();
    private volatile CompiledRun wholeTree;

    CompiledRuns(
            ModelPlan plan,
            MemoryLayout lowLayout,
            IntermediateRelease release,
            AmpBackend backend) {
        this.release = release;
        this.backend = backend;
        this.decided = new DecidedGraphPlan(plan, stages, attentions, lowLayout);
    }

    /** Notes an attention block, whose product checks a run made of it follows. */
    void attention(String path, AttentionShadow attention) {
        attentions.put(path, attention);
    }

    /** Notes a stage of the tree, whose kernel verdicts a run made of it follows. */
    void stage(String path, PrecisionStage stage) {
        stages.put(path, stage);
    }

    /**
     * Returns a SequentialBlock's shadow children with each run of children djl-amp can compile
     * replaced by one {@link CompiledRun}.
     *
     * @param block the SequentialBlock
     * @param path its path
     * @param shadows its children's shadows, in order
     */
    List<Block> group(Block block, String path, List<Block> shadows) {
        List<Pair<String, Block>> children = new ArrayList<>();
        for (Pair<String, Block> child : block.getChildren()) {
            children.add(new Pair<>(BlockPaths.child(path, child.getKey()), child.getValue()));
        }
        List<Block> result = new ArrayList<>();
        int from = 0;
        int operations = 0;
        for (int i = 0; i <= children.size(); i++) {
            int size = i < children.size() ? operationsOf(children.get(i)) : -1;
            if (size >= 0) {
                operations += size;
                continue;
            }
            if (operations >= FEWEST_OPERATIONS) {
                CompiledRun run =
                        new CompiledRun(
                                shadows.subList(from, i),
                                children.subList(from, i),
                                decided,
                                false,
                                release,
                                backend);
                List<Pair<String, Block>> covered = children.subList(from, i);
                // a run this one covers, made inside a child, runs only where this one does not
                runs.removeIf(r -> covered.stream().anyMatch(c -> r.isInside(c.getKey())));
                runs.add(run);
                result.add(run);
                if (path.isEmpty() && from == 0 && i == children.size()) {
                    wholeTree = run;
                }
            } else {
                result.addAll(shadows.subList(from, i));
            }
            if (i < children.size()) {
                result.add(shadows.get(i));
            }
            from = i + 1;
            operations = 0;
        }
        return result;
    }

    /**
     * Returns DJL's BERT encoder stack as one compiled run that takes the output before it and the
     * attention mask's offsets, or null (its reason noted) where an encoder has no compiled form.
     *
     * @param bertPath the path of the BertBlock that holds them
     * @param encoders the encoder blocks in order, each with its path
     * @param shadows their shadows, in the same order
     */
    Block encoderStack(String bertPath, List<Pair<String, Block>> encoders, List<Block> shadows) {
        try {
            ForwardGraphBuilder.ofMaskedEncoders(encoders, decided, Precision.FP32, false);
        } catch (NotCompilableException e) {
            eager.putIfAbsent(e.getBlockPath(), e.getReason());
            return null;
        }
        CompiledRun run = new CompiledRun(shadows, encoders, decided, true, release, backend);
        // the runs made inside the encoders (their feed-forward layers) run only where this does
        // not
        runs.removeIf(r -> encoders.stream().anyMatch(e -> r.isInside(e.getKey())));
        runs.add(run);
        eager.putIfAbsent(
                bertPath,
                "its embeddings, attention mask and pooling, around its compiled encoder blocks");
        return run;
    }

    /** The operations a child compiles to, or -1 (its reason noted) where it cannot be. */
    private int operationsOf(Pair<String, Block> child) {
        try {
            return ForwardGraphBuilder.of(List.of(child), decided, Precision.FP32, false)
                    .operations()
                    .size();
        } catch (NotCompilableException e) {
            eager.putIfAbsent(e.getBlockPath(), e.getReason());
            return -1;
        }
    }

    /** Whether one run covers the whole tree and has run compiled. */
    boolean isWholeTreeCompiled() {
        CompiledRun run = wholeTree;
        return run != null && run.hasRunCompiled();
    }

    /** The runs that have run compiled, described by their first and last block. */
    List<String> ranCompiled() {
        return runs.stream()
                .filter(CompiledRun::hasRunCompiled)
                .map(CompiledRun::describe)
                .toList();
    }

    /** Why part of the tree runs eagerly, or null where one run covers it. */
    String refusal() {
        CompiledRun run = wholeTree;
        if (run != null) {
            return run.refusal();
        }
        if (eager.isEmpty()) {
            return runs.isEmpty()
                    ? "root: the tree has no SequentialBlock with "
                            + FEWEST_OPERATIONS
                            + " or more operations djl-amp can compile"
                    : "root: the blocks around the compiled runs, outside any SequentialBlock";
        }
        String named =
                eager.entrySet().stream()
                        .limit(NAMED_REASONS)
                        .map(
                                e ->
                                        (e.getKey().isEmpty() ? "root" : e.getKey())
                                                + ": "
                                                + e.getValue())
                        .collect(Collectors.joining("; "));
        return eager.size() <= NAMED_REASONS
                ? named
                : named + "; and " + (eager.size() - NAMED_REASONS) + " more";
    }

    /** Says once, after the tree on {@code device} is built, what runs compiled and what not. */
    void report(Device device) {
        if (wholeTree != null) {
            LOG.info(
                    "djl-amp: compiled forward on {}: the whole tree runs as one native call from"
                            + " its second forward",
                    device);
            return;
        }
        LOG.info(
                "djl-amp: compiled forward on {}: {} run(s) of blocks compiled{}; eagerly: {}",
                device,
                runs.size(),
                runs.isEmpty()
                        ? ""
                        : " ("
                                + runs.stream()
                                        .map(CompiledRun::describe)
                                        .collect(Collectors.joining(", "))
                                + ")",
                refusal());
    }
}
