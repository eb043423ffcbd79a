package io.github.djlamp.amp.verify;

import ai.djl.nn.Block;
import ai.djl.nn.BlockList;
import ai.djl.nn.Parameter;
import ai.djl.util.Pair;
import io.github.djlamp.amp.internal.BlockCopies;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;

/**
 * The block a {@link StageCheck} runs, and the parameters it differentiates as they are. Where the
 * block holds a block whose inference forward records nothing ({@link
 * AmpBackend#recordingForCheck}: a TorchScript module that a block of the user's own calls, handing
 * it the check's {@code training=false}), the check runs a copy of the block whose fields and child
 * lists hold the engine's recording stand-in in its place, copied down to it; every other block is
 * the user's own. A block that reaches such a module another way (through a lambda, a list of its
 * own) reaches the module itself, and its check cannot differentiate it as before.
 */
final class CheckedTree {

    private CheckedTree() {}

    /**
     * Returns the block to run for the check of {@code block}: the block, its stand-in, or a copy.
     *
     * @throws ReflectiveOperationException where a copy cannot be made
     */
    static Block of(Block block, AmpBackend backend) throws ReflectiveOperationException {
        Block standIn = backend.recordingForCheck(block);
        if (standIn != block) {
            return standIn;
        }
        IdentityHashMap<Block, Block> replaced = new IdentityHashMap<>();
        for (Pair<String, Block> child : block.getChildren()) {
            Block copy = of(child.getValue(), backend);
            if (copy != child.getValue()) {
                replaced.put(child.getValue(), copy);
            }
        }
        if (replaced.isEmpty()) {
            return block;
        }
        return BlockCopies.copy(
                block,
                BlockCopies.instanceFields(block),
                value -> {
                    if (value instanceof BlockList) {
                        BlockList children = new BlockList(((BlockList) value).size());
                        for (Pair<String, Block> child : (BlockList) value) {
                            children.add(
                                    child.getKey(),
                                    replaced.getOrDefault(child.getValue(), child.getValue()));
                        }
                        return children;
                    }
                    return value instanceof Block
                            ? replaced.getOrDefault(value, (Block) value)
                            : value;
                });
    }

    /**
     * Returns the parameters of every block in {@code block}'s tree that computes with arrays it
     * holds itself ({@link AmpBackend#computesWithOwnParameters}).
     */
    static Set<Parameter> ownParameters(Block block, AmpBackend backend) {
        Set<Parameter> own = Collections.newSetFromMap(new IdentityHashMap<>());
        if (backend.computesWithOwnParameters(block)) {
            for (Pair<String, Parameter> pair : block.getParameters()) {
                own.add(pair.getValue());
            }
            return own;
        }
        for (Pair<String, Block> child : block.getChildren()) {
            own.addAll(ownParameters(child.getValue(), backend));
        }
        return own;
    }
}
