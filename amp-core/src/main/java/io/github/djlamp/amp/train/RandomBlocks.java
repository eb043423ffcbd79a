package io.github.djlamp.amp.train;

import ai.djl.nn.Block;
import ai.djl.nn.norm.Dropout;
import ai.djl.util.Pair;

/** Blocks of a tree that draw random numbers in training: DJL's {@code Dropout}. */
final class RandomBlocks {

    private RandomBlocks() {}

    /**
     * Returns the path of the first block that draws random numbers, or null.
     *
     * @param root the tree
     * @return for example {@code "05transformer/01Dropout"}, or null
     */
    static String find(Block root) {
        return find(root, "");
    }

    private static String find(Block block, String path) {
        if (block instanceof Dropout) {
            return path.isEmpty() ? "a Dropout" : path;
        }
        for (Pair<String, Block> child : block.getChildren()) {
            String found =
                    find(
                            child.getValue(),
                            path.isEmpty() ? child.getKey() : path + "/" + child.getKey());
            if (found != null) {
                return found;
            }
        }
        return null;
    }
}
