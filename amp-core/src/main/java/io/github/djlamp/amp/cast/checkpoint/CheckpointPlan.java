package io.github.djlamp.amp.cast.checkpoint;

import ai.djl.nn.Block;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.norm.Dropout;
import ai.djl.util.Pair;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.internal.DjlSeam;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.Checkpointing;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A {@link Checkpointing} setting resolved against one block tree: which consecutive children of
 * which {@code SequentialBlock}s of the tree's chain form segments. Bad settings are refused here,
 * when {@code Amp.configure} applies them, not at the first forward.
 */
public final class CheckpointPlan {

    /** The plan that checkpoints nothing. */
    public static final CheckpointPlan NONE = new CheckpointPlan(Checkpointing.none(), Map.of());

    /** A run of consecutive children, {@code [from, to)}, of one SequentialBlock. */
    public record Group(int from, int to) {}

    private final Checkpointing setting;
    private final Map<String, List<Group>> groupsBySequence;

    private CheckpointPlan(Checkpointing setting, Map<String, List<Group>> groupsBySequence) {
        this.setting = setting;
        this.groupsBySequence = groupsBySequence;
    }

    /**
     * Resolves {@code setting} against the tree under {@code root}.
     *
     * @param setting the setting, as {@code AmpOptions} holds it
     * @param root the wrapped block
     * @return the plan, {@link #NONE} when the setting checkpoints nothing
     * @throws AmpException naming the fix when the setting cannot apply to this tree
     */
    public static CheckpointPlan resolve(Checkpointing setting, Block root) {
        if (!setting.isEnabled()) {
            return NONE;
        }
        Map<String, List<Group>> groups = new LinkedHashMap<>();
        if (setting.getMode() == Checkpointing.Mode.BLOCKS) {
            selectBlocks(setting, root, groups);
        } else {
            if (!(root instanceof SequentialBlock)) {
                throw new AmpException(
                        "checkpointing="
                                + setting
                                + " makes segments of the stages of the wrapped SequentialBlock,"
                                + " but the wrapped block is "
                                + root.getClass().getName()
                                + ". Wrap the model as a SequentialBlock of its stages, or name the"
                                + " blocks to checkpoint inside its SequentialBlocks with"
                                + " Checkpointing.blocks(\"class:NAME\", \"path:PATH\")");
            }
            int stages = root.getChildren().size();
            int size = stagesPerSegment(setting, stages);
            List<Group> list = new ArrayList<>();
            for (int from = 0; from < stages; from += size) {
                list.add(new Group(from, Math.min(stages, from + size)));
            }
            groups.put("", list);
        }
        CheckpointPlan plan = new CheckpointPlan(setting, Collections.unmodifiableMap(groups));
        plan.requireReplayable(root);
        return plan;
    }

    private static int stagesPerSegment(Checkpointing setting, int stages) {
        return switch (setting.getMode()) {
            case STAGES, EVERY -> setting.getStagesPerSegment();
            case AUTO -> Math.max(1, (int) Math.round(Math.sqrt(stages)));
            case NONE, BLOCKS ->
                    throw new IllegalStateException(setting + " has no stages per segment");
        };
    }

    /** Each block a selector names, reached from the root through SequentialBlocks only. */
    private static void selectBlocks(
            Checkpointing setting, Block root, Map<String, List<Group>> groups) {
        Set<String> used = new LinkedHashSet<>();
        if (root instanceof SequentialBlock) {
            visitChain("", root, setting.getSelectors(), used, groups);
        }
        Map<String, Block> all = BlockPaths.walk(root);
        Set<String> segmentStages = stagesOf(groups, all);
        for (String selector : setting.getSelectors()) {
            if (!used.contains(selector)) {
                throw unplaceable(selector, root, all);
            }
            requireEveryMatchPlaced(selector, root, all, segmentStages);
        }
    }

    private static Set<String> stagesOf(Map<String, List<Group>> groups, Map<String, Block> all) {
        Set<String> stages = new LinkedHashSet<>();
        for (Map.Entry<String, List<Group>> entry : groups.entrySet()) {
            ai.djl.nn.BlockList children = all.get(entry.getKey()).getChildren();
            for (Group group : entry.getValue()) {
                for (int i = group.from(); i < group.to(); i++) {
                    stages.add(BlockPaths.child(entry.getKey(), children.get(i).getKey()));
                }
            }
        }
        return stages;
    }

    /**
     * Refuses a class selector that also names blocks no segment can hold (inside a ParallelBlock):
     * checkpointing only the others would save less than the user asked for, and say nothing.
     */
    private static void requireEveryMatchPlaced(
            String selector, Block root, Map<String, Block> all, Set<String> segmentStages) {
        int matched = 0;
        List<String> outside = new ArrayList<>();
        for (Map.Entry<String, Block> e : all.entrySet()) {
            String path = e.getKey();
            if (path.isEmpty() || !matches(selector, path, e.getValue())) {
                continue;
            }
            matched++;
            if (!insideAny(path, segmentStages)) {
                outside.add(path);
            }
        }
        if (outside.isEmpty()) {
            return;
        }
        String first = outside.get(0);
        throw new AmpException(
                "checkpointing: "
                        + selector
                        + " names "
                        + matched
                        + " blocks, and "
                        + outside.size()
                        + " of them (first '"
                        + first
                        + "') are not reached from the wrapped block through SequentialBlocks"
                        + " only ("
                        + outsideChain(first, root)
                        + "), so only the other "
                        + (matched - outside.size())
                        + " would be checkpointed. Checkpoint the enclosing stages instead, e.g."
                        + " path:"
                        + enclosingStage(first, root)
                        + ", or name the blocks to checkpoint by path: (PrecisionSummary lists"
                        + " every path)");
    }

    private static boolean insideAny(String path, Set<String> stages) {
        for (String stage : stages) {
            if (path.equals(stage) || path.startsWith(stage + BlockPaths.SEPARATOR)) {
                return true;
            }
        }
        return false;
    }

    private static void visitChain(
            String path,
            Block sequence,
            List<String> selectors,
            Set<String> used,
            Map<String, List<Group>> groups) {
        int index = 0;
        for (Pair<String, Block> child : sequence.getChildren()) {
            String childPath = BlockPaths.child(path, child.getKey());
            String selector = firstMatch(selectors, childPath, child.getValue());
            if (selector != null) {
                used.add(selector);
                groups.computeIfAbsent(path, p -> new ArrayList<>())
                        .add(new Group(index, index + 1));
            } else if (child.getValue() instanceof SequentialBlock) {
                visitChain(childPath, child.getValue(), selectors, used, groups);
            }
            index++;
        }
    }

    private static String firstMatch(List<String> selectors, String path, Block block) {
        for (String selector : selectors) {
            if (matches(selector, path, block)) {
                return selector;
            }
        }
        return null;
    }

    private static boolean matches(String selector, String path, Block block) {
        if (selector.startsWith("path:")) {
            return selector.substring(5).equals(path);
        }
        String name = selector.substring(6);
        Class<?> type = block.getClass();
        return name.equals(type.getName()) || name.equals(type.getSimpleName());
    }

    private static AmpException unplaceable(String selector, Block root, Map<String, Block> all) {
        for (Map.Entry<String, Block> e : all.entrySet()) {
            if (matches(selector, e.getKey(), e.getValue())) {
                return new AmpException(
                        "checkpointing: "
                                + selector
                                + " names '"
                                + e.getKey()
                                + "', which is not reached from the wrapped block through"
                                + " SequentialBlocks only ("
                                + outsideChain(e.getKey(), root)
                                + "). A segment's input must be read by the segment alone, or the"
                                + " backward of the other readers frees the graph its gradient"
                                + " flows through: checkpoint the enclosing stage instead, e.g."
                                + " path:"
                                + enclosingStage(e.getKey(), root));
            }
        }
        return new AmpException(
                "checkpointing: "
                        + selector
                        + " matches no block of the wrapped model. Its stages are: "
                        + stagePaths(root)
                        + " (PrecisionSummary lists every path)");
    }

    /** Names the first block on the way to {@code path} that is not a SequentialBlock. */
    private static String outsideChain(String path, Block root) {
        Block current = root;
        String currentPath = "";
        while (!currentPath.equals(path)) {
            if (!(current instanceof SequentialBlock)) {
                String kind =
                        current instanceof ParallelBlock
                                ? "a ParallelBlock, whose branches all read its input"
                                : "a "
                                        + current.getClass().getSimpleName()
                                        + " with its own forward";
                return "'" + (currentPath.isEmpty() ? "the root" : currentPath) + "' is " + kind;
            }
            Pair<String, Block> next = childOnTheWay(current, currentPath, path);
            currentPath = BlockPaths.child(currentPath, next.getKey());
            current = next.getValue();
        }
        return "it is a stage";
    }

    private static String enclosingStage(String path, Block root) {
        Block current = root;
        String currentPath = "";
        String stage = path;
        while (current instanceof SequentialBlock && !currentPath.equals(path)) {
            Pair<String, Block> next = childOnTheWay(current, currentPath, path);
            currentPath = BlockPaths.child(currentPath, next.getKey());
            current = next.getValue();
            stage = currentPath;
        }
        return stage;
    }

    private static Pair<String, Block> childOnTheWay(Block block, String blockPath, String path) {
        for (Pair<String, Block> child : block.getChildren()) {
            String childPath = BlockPaths.child(blockPath, child.getKey());
            if (path.equals(childPath) || path.startsWith(childPath + BlockPaths.SEPARATOR)) {
                return child;
            }
        }
        throw new IllegalStateException("no child of '" + blockPath + "' leads to '" + path + "'");
    }

    private static String stagePaths(Block root) {
        List<String> paths = new ArrayList<>();
        if (root instanceof SequentialBlock) {
            for (Pair<String, Block> child : root.getChildren()) {
                paths.add(BlockPaths.child("", child.getKey()));
            }
        }
        return paths.isEmpty()
                ? "none (the wrapped block is " + root.getClass().getSimpleName() + ")"
                : String.join(", ", paths);
    }

    /**
     * Refuses a segment holding a block whose forward pass a recomputation cannot repeat: a Dropout
     * that drops anything draws a new mask each time.
     */
    private void requireReplayable(Block root) {
        Map<String, Block> all = BlockPaths.walk(root);
        for (Map.Entry<String, List<Group>> entry : groupsBySequence.entrySet()) {
            Block sequence = all.get(entry.getKey());
            ai.djl.nn.BlockList children = sequence.getChildren();
            for (Group group : entry.getValue()) {
                for (int i = group.from(); i < group.to(); i++) {
                    String childPath = BlockPaths.child(entry.getKey(), children.get(i).getKey());
                    for (Map.Entry<String, Block> inside :
                            BlockPaths.walk(children.get(i).getValue()).entrySet()) {
                        if (inside.getValue() instanceof Dropout dropout) {
                            float rate = DjlSeam.dropoutRate(dropout);
                            if (rate > 0f) {
                                throw new AmpException(
                                        "checkpointing="
                                                + setting
                                                + " would recompute '"
                                                + childPath
                                                + "', which holds a Dropout of rate "
                                                + rate
                                                + (inside.getKey().isEmpty()
                                                        ? ""
                                                        : " at '" + inside.getKey() + "'")
                                                + ": its recomputation would draw a new mask, and"
                                                + " the gradient would not be the forward pass's."
                                                + " Checkpoint stages without dropout"
                                                + " (Checkpointing.blocks(\"path:...\")), or build"
                                                + " the checkpointed stages with dropout 0");
                            }
                        }
                    }
                }
            }
        }
    }

    /**
     * Returns the setting this plan resolves.
     *
     * @return the setting
     */
    public Checkpointing setting() {
        return setting;
    }

    /**
     * Returns whether anything is checkpointed.
     *
     * @return whether the plan makes a segment
     */
    public boolean isEnabled() {
        return !groupsBySequence.isEmpty();
    }

    /**
     * Returns the segments of the SequentialBlock at {@code path}.
     *
     * @param path the SequentialBlock's path in the tree
     * @return its segments in order, empty for none
     */
    public List<Group> groupsOf(String path) {
        return groupsBySequence.getOrDefault(path, List.of());
    }

    /**
     * Returns how many segments the plan makes.
     *
     * @return the count
     */
    public int segmentCount() {
        int count = 0;
        for (List<Group> list : groupsBySequence.values()) {
            count += list.size();
        }
        return count;
    }

    /**
     * Returns the segment (numbered from 1 in forward order) of every stage in one, by the stage's
     * path in the tree under {@code root}.
     *
     * @param root the wrapped block the plan was resolved against
     * @return the segment number by stage path
     */
    public Map<String, Integer> segmentOfStage(Block root) {
        Map<String, Block> all = BlockPaths.walk(root);
        Map<String, Integer> result = new LinkedHashMap<>();
        int number = 0;
        for (Map.Entry<String, Block> entry : all.entrySet()) {
            List<Group> groups = groupsOf(entry.getKey());
            if (groups.isEmpty()) {
                continue;
            }
            ai.djl.nn.BlockList children = entry.getValue().getChildren();
            for (Group group : groups) {
                number++;
                for (int i = group.from(); i < group.to(); i++) {
                    result.put(BlockPaths.child(entry.getKey(), children.get(i).getKey()), number);
                }
            }
        }
        return result;
    }

    /**
     * Returns the SequentialBlocks that hold segments.
     *
     * @return their paths
     */
    public Set<String> sequences() {
        return groupsBySequence.keySet();
    }
}
