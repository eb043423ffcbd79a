package io.github.djlamp.amp.train;

import ai.djl.nn.Block;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.recurrent.RecurrentBlock;
import ai.djl.util.Pair;
import io.github.djlamp.amp.capture.CaptureHooks.RandomDraws;

/**
 * Blocks of a tree that draw random numbers in training: DJL's {@code Dropout}, which draws from
 * the device's default generator, and a recurrent block of several layers with a dropout rate,
 * whose dropout between layers is drawn inside the engine's recurrent kernel (cuDNN keeps a random
 * state of its own there).
 */
final class RandomBlocks {

    private RandomBlocks() {}

    /**
     * Returns where the tree draws random numbers, or null: a recurrent kernel's own draws named
     * first, since no graph puts them back.
     *
     * @param root the tree
     * @return for example {@code "05transformer/01Dropout draws random numbers"}, or null
     */
    static RandomDraws find(Block root) {
        String[] found = new String[2]; // a Dropout's path, a recurrent block's
        find(root, "", found);
        if (found[1] != null) {
            return new RandomDraws(
                    found[1] + " draws its dropout masks inside the engine's recurrent kernel",
                    false);
        }
        return found[0] == null ? null : new RandomDraws(found[0] + " draws random numbers", true);
    }

    private static void find(Block block, String path, String[] found) {
        String name = path.isEmpty() ? "the block" : path;
        if (block instanceof Dropout && found[0] == null) {
            found[0] = name;
        } else if (block instanceof RecurrentBlock && found[1] == null && dropsOut(block)) {
            found[1] = name;
        }
        for (Pair<String, Block> child : block.getChildren()) {
            find(
                    child.getValue(),
                    path.isEmpty() ? child.getKey() : path + "/" + child.getKey(),
                    found);
        }
    }

    /** Dropout between layers: a rate above 0 and more than one layer, as libtorch applies it. */
    private static boolean dropsOut(Block recurrent) {
        float rate = (float) DjlOptimizers.read(recurrent, RecurrentBlock.class, "dropRate");
        int layers = (int) DjlOptimizers.read(recurrent, RecurrentBlock.class, "numLayers");
        return rate > 0 && layers > 1;
    }
}
