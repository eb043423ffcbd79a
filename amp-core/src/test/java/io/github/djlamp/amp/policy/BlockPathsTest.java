package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class BlockPathsTest {

    @Test
    void walksEveryBlockInPreOrderWithDjlChildNames() {
        SequentialBlock root = TestBlocks.tree();
        Map<String, Block> paths = BlockPaths.walk(root);
        assertEquals(
                List.of(
                        "",
                        "01Linear",
                        "02BatchNorm",
                        "03LambdaBlock",
                        "04SequentialBlock",
                        "04SequentialBlock/01Linear",
                        "04SequentialBlock/02LayerNorm",
                        "05Composite",
                        "05Composite/01Linear"),
                List.copyOf(paths.keySet()));
        assertSame(root, paths.get(""));
        assertSame(root.getChildren().get(3).getValue(), paths.get("04SequentialBlock"));
        assertSame(
                root.getChildren().get(3).getValue().getChildren().get(1).getValue(),
                paths.get("04SequentialBlock/02LayerNorm"));
    }

    @Test
    void walksParallelBlocks() {
        Linear left = Linear.builder().setUnits(2).build();
        Linear right = Linear.builder().setUnits(2).build();
        ParallelBlock parallel =
                new ParallelBlock(
                        list -> list.get(0), List.of(new SequentialBlock().add(left), right));
        Map<String, Block> paths = BlockPaths.walk(new SequentialBlock().add(parallel));
        assertSame(left, paths.get("01ParallelBlock/01SequentialBlock/01Linear"));
        assertSame(right, paths.get("01ParallelBlock/02Linear"));
        assertEquals(5, paths.size());
    }

    @Test
    void aLeafIsItsOwnTree() {
        Block relu = Activation.reluBlock();
        assertEquals(Map.of("", relu), BlockPaths.walk(relu));
    }

    @Test
    void escapesSeparatorsInsideChildNames() {
        Block child = new TestBlocks.Leaf();
        Map<String, Block> paths = BlockPaths.walk(new TestBlocks.OddlyNamed("a/b\\c", child));
        assertSame(child, paths.get("01a\\/b\\\\c"));
        assertEquals("x/01a\\/b", BlockPaths.child("x", "01a/b"));
        assertEquals("01Linear", BlockPaths.child("", "01Linear"));
    }

    @Test
    void rejectsNullRoot() {
        assertThrows(NullPointerException.class, () -> BlockPaths.walk(null));
    }
}
