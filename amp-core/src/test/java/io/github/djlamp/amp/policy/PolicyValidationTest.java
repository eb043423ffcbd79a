package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.LayerNorm;
import ai.djl.nn.recurrent.LSTM;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class PolicyValidationTest {

    private static PrecisionPolicy.Builder bf16() {
        return PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16());
    }

    private static String rejection(PrecisionPolicy policy, Block root) {
        return assertThrows(IllegalArgumentException.class, () -> policy.validateAgainst(root))
                .getMessage();
    }

    @Test
    void acceptsOverridesThatApply() {
        assertDoesNotThrow(
                () ->
                        bf16().overridePath("04SequentialBlock/02LayerNorm", CastCategory.LOW)
                                .overridePath("05Composite", CastCategory.PASS_THROUGH)
                                .overridePath("01Linear", CastCategory.FP32)
                                .overrideClass(LayerNorm.class, CastCategory.LOW)
                                .build()
                                .validateAgainst(TestBlocks.tree()));
        assertDoesNotThrow(
                () ->
                        PrecisionPolicy.builder(PrecisionPolicy.float32())
                                .overridePath("", CastCategory.FP32)
                                .build()
                                .validateAgainst(TestBlocks.tree()));
    }

    @Test
    void rejectsPathsNotInTheTreeSuggestingTheClosest() {
        String m =
                rejection(
                        bf16().overridePath("04SequentialBlock/01Linaer", CastCategory.FP32)
                                .build(),
                        TestBlocks.tree());
        assertTrue(m.startsWith("Path override '04SequentialBlock/01Linaer' names no block"), m);
        assertTrue(m.contains("closest paths are '04SequentialBlock/01Linear'"), m);
        assertTrue(m.contains("the tree has 9 blocks"), m);
    }

    @Test
    void rejectsPathsInsideAUnit() {
        String m =
                rejection(
                        bf16().overridePath("05Composite/01Linear", CastCategory.FP32).build(),
                        TestBlocks.tree());
        assertTrue(m.contains("'05Composite/01Linear' has no effect"), m);
        assertTrue(m.contains("inside '05Composite'"), m);
        assertTrue(m.contains(TestBlocks.Composite.class.getName()), m);
        assertTrue(m.contains("one fp32 unit"), m);

        // a container made a unit by an override hides its children too
        m =
                rejection(
                        bf16().overridePath("04SequentialBlock", CastCategory.PASS_THROUGH)
                                .overridePath("04SequentialBlock/01Linear", CastCategory.FP32)
                                .build(),
                        TestBlocks.tree());
        assertTrue(m.contains("inside '04SequentialBlock'"), m);
        assertTrue(m.contains("one pass_through unit"), m);

        // so does an override of the root
        m =
                rejection(
                        bf16().overridePath("", CastCategory.FP32)
                                .overridePath("01Linear", CastCategory.LOW)
                                .build(),
                        TestBlocks.tree());
        assertTrue(m.contains("inside '' (the root)"), m);
    }

    @Test
    void rejectsClassesNoBlockHas() {
        String m =
                rejection(
                        bf16().overrideClass(LSTM.class, CastCategory.LOW).build(),
                        TestBlocks.tree());
        assertTrue(m.contains("Class override ai.djl.nn.recurrent.LSTM matches no block"), m);
        assertTrue(m.contains("ai.djl.nn.core.Linear"), m);
        assertTrue(m.contains("ai.djl.nn.SequentialBlock"), m);

        // a subclass override is not satisfied by instances of the superclass
        m =
                rejection(
                        bf16().overrideClass(TestBlocks.MyLinear.class, CastCategory.FP32).build(),
                        new SequentialBlock().add(Linear.builder().setUnits(2).build()));
        assertTrue(m.contains("TestBlocks$MyLinear matches no block"), m);
        assertDoesNotThrow(
                () ->
                        bf16().overrideClass(Linear.class, CastCategory.FP32)
                                .build()
                                .validateAgainst(
                                        new SequentialBlock().add(new TestBlocks.MyLinear())));
    }

    @Test
    void closestPathsAreRankedByEditDistance() {
        assertEquals(0, PolicyValidation.editDistance("abc", "abc"));
        assertEquals(1, PolicyValidation.editDistance("abc", "abd"));
        assertEquals(3, PolicyValidation.editDistance("", "abc"));
        assertEquals(2, PolicyValidation.editDistance("01Linaer", "01Linear"));
        assertEquals(
                List.of("02Linear", "01Linear", "03LayerNorm"),
                PolicyValidation.closest(
                                "02Lienar",
                                new java.util.LinkedHashSet<>(
                                        List.of("01Linear", "02Linear", "03LayerNorm")))
                        .subList(0, 3));
        Set<String> many = new java.util.LinkedHashSet<>();
        for (int i = 0; i < 30; i++) {
            many.add(String.format("%02dLinear", i));
        }
        assertEquals(PolicyValidation.SUGGESTED_PATHS, PolicyValidation.closest("x", many).size());
    }
}
