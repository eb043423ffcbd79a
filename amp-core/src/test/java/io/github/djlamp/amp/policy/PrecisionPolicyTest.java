package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.norm.LayerNorm;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PrecisionPolicyTest {

    private static final Linear LINEAR = Linear.builder().setUnits(10).build();

    @Test
    void presetsHaveKerasNamesAndPrecisions() {
        assertEquals("mixed_float16", PrecisionPolicy.mixedFloat16().getName());
        assertEquals(Precision.FP16, PrecisionPolicy.mixedFloat16().getComputePrecision());
        assertEquals("mixed_bfloat16", PrecisionPolicy.mixedBfloat16().getName());
        assertEquals(Precision.BF16, PrecisionPolicy.mixedBfloat16().getComputePrecision());
        assertEquals("float32", PrecisionPolicy.float32().getName());
        assertEquals(Precision.FP32, PrecisionPolicy.float32().getComputePrecision());
        assertEquals("auto", PrecisionPolicy.auto().getName());
        for (PrecisionPolicy p :
                new PrecisionPolicy[] {
                    PrecisionPolicy.mixedFloat16(),
                    PrecisionPolicy.mixedBfloat16(),
                    PrecisionPolicy.float32(),
                    PrecisionPolicy.auto()
                }) {
            assertEquals(Precision.FP32, p.getVariablePrecision());
            assertEquals(p.getName().equals("auto"), p.isAuto());
            assertTrue(p.getPathOverrides().isEmpty());
            assertTrue(p.getClassOverrides().isEmpty());
        }
    }

    @Test
    void namedAcceptsNamesAndAliasesInAnyCase() {
        assertEquals(PrecisionPolicy.mixedFloat16(), PrecisionPolicy.named("mixed_float16"));
        assertEquals(PrecisionPolicy.mixedFloat16(), PrecisionPolicy.named("FP16"));
        assertEquals(PrecisionPolicy.mixedBfloat16(), PrecisionPolicy.named("Mixed_BFloat16"));
        assertEquals(PrecisionPolicy.mixedBfloat16(), PrecisionPolicy.named("bf16"));
        // the names of torch.bfloat16 and torch.float16, what a PyTorch user tries first
        assertEquals(PrecisionPolicy.mixedBfloat16(), PrecisionPolicy.named("bfloat16"));
        assertEquals(PrecisionPolicy.mixedFloat16(), PrecisionPolicy.named("Float16"));
        assertEquals(PrecisionPolicy.float32(), PrecisionPolicy.named(" float32 "));
        assertEquals(PrecisionPolicy.float32(), PrecisionPolicy.named("fp32"));
        assertEquals(PrecisionPolicy.auto(), PrecisionPolicy.named("AUTO"));
    }

    @Test
    void namedRejectsUnknownNamesListingValidOnes() {
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> PrecisionPolicy.named("half"));
        String m = e.getMessage();
        assertTrue(m.contains("Unknown precision policy 'half'"), m);
        for (String name :
                new String[] {
                    "mixed_float16",
                    "mixed_bfloat16",
                    "float32",
                    "auto",
                    "bf16",
                    "fp16",
                    "bfloat16",
                    "float16"
                }) {
            assertTrue(m.contains(name), m);
        }
        assertThrows(IllegalArgumentException.class, () -> PrecisionPolicy.named(null));
        assertThrows(IllegalArgumentException.class, () -> PrecisionPolicy.named(""));
    }

    @Test
    void autoHasNoComputePrecisionUntilResolved() {
        IllegalStateException e =
                assertThrows(
                        IllegalStateException.class,
                        () -> PrecisionPolicy.auto().getComputePrecision());
        assertTrue(e.getMessage().contains("resolveAuto"), e.getMessage());
    }

    @Test
    void autoResolvesToThePresetOfTheRecommendedPrecision() {
        PrecisionPolicy auto = PrecisionPolicy.auto();
        assertEquals(PrecisionPolicy.mixedBfloat16(), auto.resolveAuto(Precision.BF16));
        assertEquals(PrecisionPolicy.mixedFloat16(), auto.resolveAuto(Precision.FP16));
        assertEquals(PrecisionPolicy.float32(), auto.resolveAuto(Precision.FP32));
        assertFalse(auto.resolveAuto(Precision.BF16).isAuto());
    }

    @Test
    void autoKeepsItsOverridesWhenResolved() {
        PrecisionPolicy auto =
                PrecisionPolicy.builder(PrecisionPolicy.auto())
                        .overridePath("01Linear", CastCategory.FP32)
                        .overrideClass(LayerNorm.class, CastCategory.LOW)
                        .build();
        PrecisionPolicy resolved = auto.resolveAuto(Precision.BF16);
        assertEquals("mixed_bfloat16", resolved.getName());
        assertEquals(auto.getPathOverrides(), resolved.getPathOverrides());
        assertEquals(auto.getClassOverrides(), resolved.getClassOverrides());
    }

    @Test
    void resolveAutoLeavesConcretePoliciesAlone() {
        PrecisionPolicy bf16 = PrecisionPolicy.mixedBfloat16();
        assertSame(bf16, bf16.resolveAuto(Precision.FP16));
        assertSame(
                PrecisionPolicy.float32(), PrecisionPolicy.float32().resolveAuto(Precision.BF16));
    }

    @Test
    void float32PolicyResolvesLowToFp32() {
        PrecisionPolicy fp32 = PrecisionPolicy.float32();
        assertEquals(CastCategory.FP32, fp32.categoryOf(LINEAR, "01Linear"));
        assertEquals(
                CastCategory.FP32,
                fp32.categoryOf(
                        Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(4).build(),
                        null));
        assertEquals(CastCategory.PASS_THROUGH, fp32.categoryOf(BatchNorm.builder().build(), ""));
        assertEquals(CastCategory.CONTAINER, fp32.categoryOf(new SequentialBlock(), ""));
        PrecisionPolicy overridden =
                PrecisionPolicy.builder(fp32)
                        .overrideClass(LayerNorm.class, CastCategory.LOW)
                        .build();
        assertEquals(CastCategory.FP32, overridden.categoryOf(LayerNorm.builder().build(), null));
    }

    @Test
    void mixedPoliciesKeepLowAndAutoLeavesItForLater() {
        assertEquals(CastCategory.LOW, PrecisionPolicy.mixedBfloat16().categoryOf(LINEAR, null));
        assertEquals(CastCategory.LOW, PrecisionPolicy.mixedFloat16().categoryOf(LINEAR, null));
        assertEquals(CastCategory.LOW, PrecisionPolicy.auto().categoryOf(LINEAR, null));
        assertEquals(
                CastCategory.PASS_THROUGH,
                PrecisionPolicy.mixedBfloat16().categoryOf(Activation.reluBlock(), null));
    }

    @Test
    void pathOverrideBeatsClassOverrideBeatsDefault() {
        PrecisionPolicy policy =
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .overrideClass(Linear.class, CastCategory.PASS_THROUGH)
                        .overridePath("04SequentialBlock/01Linear", CastCategory.FP32)
                        .build();
        assertEquals(CastCategory.FP32, policy.categoryOf(LINEAR, "04SequentialBlock/01Linear"));
        assertEquals(CastCategory.PASS_THROUGH, policy.categoryOf(LINEAR, "01Linear"));
        assertEquals(CastCategory.PASS_THROUGH, policy.categoryOf(LINEAR, null));
        assertEquals(
                CastCategory.LOW,
                PrecisionPolicy.mixedBfloat16().categoryOf(LINEAR, "04SequentialBlock/01Linear"));
    }

    @Test
    void pathOverrideAppliesToItsPathOnly() {
        PrecisionPolicy policy =
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .overridePath("01Linear", CastCategory.FP32)
                        .build();
        assertEquals(CastCategory.FP32, policy.categoryOf(LINEAR, "01Linear"));
        assertEquals(CastCategory.LOW, policy.categoryOf(LINEAR, "01Linear/x"));
        assertEquals(CastCategory.LOW, policy.categoryOf(LINEAR, "04SequentialBlock/01Linear"));
        assertEquals(CastCategory.LOW, policy.categoryOf(LINEAR, null));
    }

    @Test
    void mostSpecificClassOverrideWins() {
        PrecisionPolicy policy =
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .overrideClass(TestBlocks.MyLinear.class, CastCategory.PASS_THROUGH)
                        .overrideClass(Linear.class, CastCategory.FP32)
                        .build();
        assertEquals(CastCategory.FP32, policy.categoryOf(LINEAR, null));
        assertEquals(CastCategory.PASS_THROUGH, policy.categoryOf(new TestBlocks.MyLinear(), null));
        // no override for MyFinerLinear itself: its nearest overridden superclass is MyLinear
        assertEquals(
                CastCategory.PASS_THROUGH, policy.categoryOf(new TestBlocks.MyFinerLinear(), null));
        // an abstract superclass works too
        PrecisionPolicy byAbstract =
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .overrideClass(ai.djl.nn.AbstractBlock.class, CastCategory.FP32)
                        .build();
        assertEquals(CastCategory.FP32, byAbstract.categoryOf(LINEAR, null));
        assertEquals(CastCategory.FP32, byAbstract.categoryOf(new SequentialBlock(), null));
    }

    @Test
    void anOverrideTurnsAContainerIntoAUnit() {
        PrecisionPolicy policy =
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .overridePath("04SequentialBlock", CastCategory.FP32)
                        .build();
        Map<String, CastCategory> resolved = policy.resolveAll(TestBlocks.tree());
        assertEquals(CastCategory.FP32, resolved.get("04SequentialBlock"));
        assertFalse(resolved.containsKey("04SequentialBlock/01Linear"));
    }

    @Test
    void resolveAllVisitsContainersChildrenButNotUnits() {
        Map<String, CastCategory> resolved =
                PrecisionPolicy.mixedBfloat16().resolveAll(TestBlocks.tree());
        assertEquals(
                Map.of(
                        "", CastCategory.CONTAINER,
                        "01Linear", CastCategory.LOW,
                        "02BatchNorm", CastCategory.PASS_THROUGH,
                        "03LambdaBlock", CastCategory.PASS_THROUGH,
                        "04SequentialBlock", CastCategory.CONTAINER,
                        "04SequentialBlock/01Linear", CastCategory.LOW,
                        "04SequentialBlock/02LayerNorm", CastCategory.FP32,
                        "05Composite", CastCategory.FP32),
                resolved);
        assertEquals("", resolved.keySet().iterator().next());
    }

    @Test
    void builderRejectsContainerAndInterfaces() {
        PrecisionPolicy.Builder builder = PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16());
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> builder.overridePath("01Linear", CastCategory.CONTAINER));
        assertTrue(e.getMessage().contains("CONTAINER"), e.getMessage());
        assertTrue(e.getMessage().contains("low, fp32, pass_through"), e.getMessage());
        assertThrows(
                IllegalArgumentException.class,
                () -> builder.overrideClass(Linear.class, CastCategory.CONTAINER));
        e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> builder.overrideClass(Block.class, CastCategory.FP32));
        assertTrue(e.getMessage().contains("not an interface"), e.getMessage());
        assertThrows(
                NullPointerException.class, () -> builder.overridePath(null, CastCategory.FP32));
        assertThrows(NullPointerException.class, () -> builder.overridePath("a", null));
    }

    @Test
    void builderStartsFromTheBaseAndReplacesOverrides() {
        PrecisionPolicy base =
                PrecisionPolicy.builder(PrecisionPolicy.mixedFloat16())
                        .overridePath("a", CastCategory.FP32)
                        .build();
        PrecisionPolicy derived =
                PrecisionPolicy.builder(base)
                        .overridePath("a", CastCategory.PASS_THROUGH)
                        .overridePath("b", CastCategory.LOW)
                        .build();
        assertEquals("mixed_float16", derived.getName());
        assertEquals(
                Map.of("a", CastCategory.PASS_THROUGH, "b", CastCategory.LOW),
                derived.getPathOverrides());
        assertEquals(Map.of("a", CastCategory.FP32), base.getPathOverrides());
        assertThrows(
                UnsupportedOperationException.class,
                () -> derived.getPathOverrides().put("c", CastCategory.LOW));
    }

    @Test
    void equalityCoversNameAndOverrides() {
        PrecisionPolicy a =
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .overridePath("x", CastCategory.FP32)
                        .overrideClass(LayerNorm.class, CastCategory.LOW)
                        .build();
        PrecisionPolicy sameInOtherOrder =
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .overrideClass(LayerNorm.class, CastCategory.LOW)
                        .overridePath("x", CastCategory.FP32)
                        .build();
        assertEquals(a, sameInOtherOrder);
        assertEquals(a.hashCode(), sameInOtherOrder.hashCode());
        assertEquals(a.toString(), sameInOtherOrder.toString());
        assertNotEquals(a, PrecisionPolicy.mixedBfloat16());
        assertNotEquals(
                a,
                PrecisionPolicy.builder(PrecisionPolicy.mixedFloat16())
                        .overridePath("x", CastCategory.FP32)
                        .overrideClass(LayerNorm.class, CastCategory.LOW)
                        .build());
        assertNotEquals(
                a, PrecisionPolicy.builder(a).overridePath("x", CastCategory.PASS_THROUGH).build());
        assertNotEquals(PrecisionPolicy.mixedBfloat16(), PrecisionPolicy.mixedFloat16());
    }
}
