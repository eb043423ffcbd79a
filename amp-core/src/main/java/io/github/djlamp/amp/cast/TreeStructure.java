package io.github.djlamp.amp.cast;

import ai.djl.nn.Block;
import ai.djl.util.Pair;
import java.util.ArrayList;
import java.util.List;

/**
 * The children of every container a shadow tree was built from, to notice cheaply when the user
 * changes the tree afterwards ({@code SequentialBlock.removeLastBlock()}, {@code add(...)}): the
 * shadow holds the old children and must be rebuilt, or forward would run the old head.
 */
final class TreeStructure {

    private final List<Block> containers = new ArrayList<>();
    private final List<List<Block>> children = new ArrayList<>();

    private TreeStructure() {}

    /** Records every block that has children, with its children. */
    static TreeStructure of(Block root) {
        TreeStructure structure = new TreeStructure();
        structure.record(root);
        return structure;
    }

    private void record(Block block) {
        if (block.getChildren().isEmpty()) {
            return;
        }
        containers.add(block);
        children.add(childrenOf(block));
        for (Pair<String, Block> child : block.getChildren()) {
            record(child.getValue());
        }
    }

    /** Returns whether every recorded container still has exactly the recorded children. */
    boolean isCurrent() {
        for (int i = 0; i < containers.size(); i++) {
            List<Block> now = childrenOf(containers.get(i));
            List<Block> then = children.get(i);
            if (now.size() != then.size()) {
                return false;
            }
            for (int j = 0; j < now.size(); j++) {
                if (now.get(j) != then.get(j)) {
                    return false;
                }
            }
        }
        return true;
    }

    private static List<Block> childrenOf(Block block) {
        List<Block> list = new ArrayList<>();
        for (Pair<String, Block> child : block.getChildren()) {
            list.add(child.getValue());
        }
        return list;
    }
}
