package io.github.djlamp.amp.policy;

import ai.djl.nn.Block;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * Checks that a policy's overrides apply to a block tree, reading which blocks djl-amp visits from
 * the tree's {@link ModelPlan}.
 */
final class PolicyValidation {

    /** How many near paths a message suggests. */
    static final int SUGGESTED_PATHS = 5;

    /** How many class names a message lists. */
    static final int LISTED_CLASSES = 20;

    private PolicyValidation() {}

    static void validate(ModelPlan plan) {
        PrecisionPolicy policy = plan.getPolicy();
        Map<String, Block> all = BlockPaths.walk(plan.getRoot());
        Map<String, CastCategory> visited = plan.getPolicyCategories();
        for (String path : policy.getPathOverrides().keySet()) {
            if (!all.containsKey(path)) {
                throw new IllegalArgumentException(
                        "Path override "
                                + quote(path)
                                + " names no block in the tree; the closest paths are "
                                + closest(path, all.keySet()).stream()
                                        .map(PolicyValidation::quote)
                                        .collect(Collectors.joining(", "))
                                + " (the tree has "
                                + all.size()
                                + " blocks; BlockPaths.walk(root) lists them)");
            }
            if (!visited.containsKey(path)) {
                String unit = enclosingUnit(path, visited);
                throw new IllegalArgumentException(
                        "Path override "
                                + quote(path)
                                + " has no effect: it names a block inside "
                                + quote(unit)
                                + " ("
                                + all.get(unit).getClass().getName()
                                + "), which djl-amp runs as one "
                                + visited.get(unit).configName()
                                + " unit without descending into it; override "
                                + quote(unit)
                                + " instead");
            }
        }
        for (Class<? extends Block> c : policy.getClassOverrides().keySet()) {
            if (all.values().stream().noneMatch(c::isInstance)) {
                throw new IllegalArgumentException(
                        "Class override "
                                + c.getName()
                                + " matches no block in the tree (no block is an instance of it);"
                                + " block classes in the tree: "
                                + classesIn(all.values()));
            }
        }
    }

    /** Returns the deepest visited non-container ancestor of an unvisited path. */
    private static String enclosingUnit(String path, Map<String, CastCategory> visited) {
        String unit = "";
        for (Map.Entry<String, CastCategory> e : visited.entrySet()) {
            String p = e.getKey();
            boolean ancestor = p.isEmpty() || path.startsWith(p + BlockPaths.SEPARATOR);
            if (ancestor && e.getValue() != CastCategory.CONTAINER && p.length() >= unit.length()) {
                unit = p;
            }
        }
        return unit;
    }

    /**
     * Returns the existing paths nearest to {@code path} by edit distance, in tree order on ties.
     */
    static List<String> closest(String path, Set<String> paths) {
        List<String> ordered = new ArrayList<>(paths);
        Map<String, Integer> distance = new LinkedHashMap<>();
        for (String p : ordered) {
            distance.put(p, editDistance(path, p));
        }
        ordered.sort(Comparator.comparingInt(distance::get));
        return ordered.subList(0, Math.min(SUGGESTED_PATHS, ordered.size()));
    }

    /** Levenshtein distance: insertions, deletions and substitutions of one character. */
    static int editDistance(String a, String b) {
        int[] previous = new int[b.length() + 1];
        int[] current = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            previous[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            current[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int substitution = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                current[j] = Math.min(substitution, Math.min(previous[j], current[j - 1]) + 1);
            }
            int[] swap = previous;
            previous = current;
            current = swap;
        }
        return previous[b.length()];
    }

    private static String classesIn(Iterable<Block> blocks) {
        Set<String> names = new LinkedHashSet<>();
        for (Block block : blocks) {
            names.add(block.getClass().getName());
        }
        String listed = names.stream().limit(LISTED_CLASSES).collect(Collectors.joining(", "));
        int more = names.size() - LISTED_CLASSES;
        return more > 0 ? listed + " and " + more + " more" : listed;
    }

    private static String quote(String path) {
        return path.isEmpty() ? "'' (the root)" : "'" + path + "'";
    }
}
