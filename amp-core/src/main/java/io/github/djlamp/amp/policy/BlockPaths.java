package io.github.djlamp.amp.policy;

import ai.djl.nn.Block;
import ai.djl.util.Pair;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Names every block of a tree by its path from the root.
 *
 * <p>A path is the chain of child names, as DJL's {@link Block#getChildren()} gives them, joined by
 * {@code /}. DJL names a child by its position (two digits, from 01) followed by the name it was
 * added under, which for {@link ai.djl.nn.SequentialBlock#add(Block)} is the simple class name: the
 * second child of the third child of the root is e.g. {@code 03SequentialBlock/02Linear}. The root
 * itself has the empty path. A {@code /} or {@code \} inside a child name is written {@code \/} or
 * {@code \\}, so that every path names one block.
 */
public final class BlockPaths {

    /** The separator between child names in a path. */
    public static final String SEPARATOR = "/";

    private BlockPaths() {}

    /**
     * Returns every block reachable from {@code root} through {@link Block#getChildren()}, keyed by
     * path, in depth-first pre-order (a block before its children, children in DJL's order).
     *
     * @param root the root of the tree
     * @return an unmodifiable map from path to block, starting with {@code "" -> root}
     */
    public static Map<String, Block> walk(Block root) {
        Objects.requireNonNull(root, "root");
        Map<String, Block> paths = new LinkedHashMap<>();
        visit("", root, paths);
        return Collections.unmodifiableMap(paths);
    }

    /**
     * Returns the path of a child given its parent's path and the name DJL gives the child.
     *
     * @param parentPath the parent's path, {@code ""} for the root
     * @param childName the child's name in the parent's {@link Block#getChildren()}
     * @return the child's path
     */
    public static String child(String parentPath, String childName) {
        String escaped = childName.replace("\\", "\\\\").replace(SEPARATOR, "\\" + SEPARATOR);
        return parentPath.isEmpty() ? escaped : parentPath + SEPARATOR + escaped;
    }

    private static void visit(String path, Block block, Map<String, Block> paths) {
        paths.put(path, block);
        for (Pair<String, Block> child : block.getChildren()) {
            visit(child(path, child.getKey()), child.getValue(), paths);
        }
    }
}
