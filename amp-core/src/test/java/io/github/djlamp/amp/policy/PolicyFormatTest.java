package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.LayerNorm;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.junit.jupiter.api.Test;

class PolicyFormatTest {

    private static final PrecisionPolicy WITH_OVERRIDES =
            PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                    .overrideClass(LayerNorm.class, CastCategory.LOW)
                    .overridePath("02SequentialBlock/01Linear", CastCategory.FP32)
                    .overrideClass(TestBlocks.MyLinear.class, CastCategory.PASS_THROUGH)
                    .overridePath("01Conv2d", CastCategory.PASS_THROUGH)
                    .build();

    private static void assertRejected(String text, String... parts) {
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> PrecisionPolicy.parse(text));
        for (String part : parts) {
            assertTrue(e.getMessage().contains(part), () -> "message was: " + e.getMessage());
        }
    }

    @Test
    void presetsPrintTheirNames() {
        assertEquals("mixed_float16", PrecisionPolicy.mixedFloat16().toString());
        assertEquals("mixed_bfloat16", PrecisionPolicy.mixedBfloat16().toString());
        assertEquals("float32", PrecisionPolicy.float32().toString());
        assertEquals("auto", PrecisionPolicy.auto().toString());
    }

    @Test
    void overridesPrintPathsThenClassesSorted() {
        assertEquals(
                "mixed_bfloat16[path:01Conv2d=pass_through,path:02SequentialBlock/01Linear=fp32,"
                        + "class:ai.djl.nn.norm.LayerNorm=low,"
                        + "class:io.github.djlamp.amp.policy.TestBlocks$MyLinear=pass_through]",
                WITH_OVERRIDES.toString());
    }

    @Test
    void stringFormRoundTrips() {
        List<PrecisionPolicy> policies =
                List.of(
                        PrecisionPolicy.mixedFloat16(),
                        PrecisionPolicy.mixedBfloat16(),
                        PrecisionPolicy.float32(),
                        PrecisionPolicy.auto(),
                        WITH_OVERRIDES,
                        PrecisionPolicy.builder(PrecisionPolicy.auto())
                                .overridePath("", CastCategory.FP32)
                                .build(),
                        PrecisionPolicy.builder(PrecisionPolicy.float32())
                                .overridePath("01a\\/b,c=d[e]\\\\f", CastCategory.LOW)
                                .build());
        for (PrecisionPolicy policy : policies) {
            assertEquals(policy, PrecisionPolicy.parse(policy.toString()), policy.toString());
        }
    }

    @Test
    void specialCharactersInPathsAreEscaped() {
        PrecisionPolicy policy =
                PrecisionPolicy.builder(PrecisionPolicy.mixedFloat16())
                        .overridePath("a,b=c]", CastCategory.FP32)
                        .build();
        assertEquals("mixed_float16[path:a\\,b\\=c\\]=fp32]", policy.toString());
        assertEquals(
                Map.of("a,b=c]", CastCategory.FP32),
                PrecisionPolicy.parse(policy.toString()).getPathOverrides());
    }

    @Test
    void parseIsLenientAboutCaseAliasesAndSpaces() {
        PrecisionPolicy parsed =
                PrecisionPolicy.parse(
                        " BF16 [ path:01Linear = FP32 , class:ai.djl.nn.core.Linear=Pass_Through ] ");
        assertEquals(
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .overridePath("01Linear", CastCategory.FP32)
                        .overrideClass(Linear.class, CastCategory.PASS_THROUGH)
                        .build(),
                parsed);
        assertEquals(PrecisionPolicy.float32(), PrecisionPolicy.parse("fp32"));
    }

    @Test
    void rejectsUnknownPolicyName() {
        assertRejected("mixed_float8", "Unknown precision policy 'mixed_float8'", "mixed_bfloat16");
        assertRejected(
                "half[path:a=fp32]",
                "In precision policy 'half[path:a=fp32]'",
                "Unknown precision policy 'half'",
                "float32");
    }

    @Test
    void rejectsUnknownCategory() {
        assertRejected(
                "bf16[path:01Linear=half]",
                "Unknown cast category 'half'",
                "low, fp32, pass_through");
        assertRejected("bf16[path:01Linear=container]", "cannot be set", "low, fp32, pass_through");
    }

    @Test
    void rejectsBadClasses() {
        assertRejected(
                "bf16[class:com.example.NoSuchBlock=fp32]",
                "Unknown block class 'com.example.NoSuchBlock'",
                "ai.djl.nn.Block");
        assertRejected(
                "bf16[class:java.lang.String=fp32]",
                "Class 'java.lang.String' in a class override is not a block",
                "ai.djl.nn.Block");
        assertRejected("bf16[class:ai.djl.nn.Block=fp32]", "not an interface");
        assertRejected("bf16[class:=fp32]", "Empty class name");
    }

    @Test
    void rejectsMalformedStrings() {
        String grammar = "NAME[path:PATH=CATEGORY,class:CLASS=CATEGORY,...]";
        assertRejected("bf16[path:a=fp32", "missing the closing ']'", grammar);
        assertRejected("bf16[path:a=fp32]x", "unexpected text after ']': 'x'", grammar);
        assertRejected("bf16]", "']' without '['", grammar);
        assertRejected("bf16[]", "an empty override", grammar);
        assertRejected("bf16[path:a=fp32,,path:b=low]", "an empty override");
        assertRejected("bf16[path:a]", "override 'path:a' has no '=CATEGORY'");
        assertRejected("bf16[a=fp32]", "starts with neither 'path:' nor 'class:'");
        assertRejected("bf16[path:a[0]=fp32]", "unescaped '['");
        assertRejected("bf16[path:a\\", "escapes nothing");
        assertRejected("bf16[path:a=fp32,path:a=low]", "path 'a' is overridden twice");
        assertRejected(
                "bf16[class:ai.djl.nn.core.Linear=fp32,class:ai.djl.nn.core.Linear=low]",
                "class ai.djl.nn.core.Linear is overridden twice");
        assertThrows(IllegalArgumentException.class, () -> PrecisionPolicy.parse(null));
    }

    @Test
    void mapFormRoundTrips() {
        Map<String, String> map = WITH_OVERRIDES.toMap();
        assertEquals(
                List.of(
                        "policy",
                        "override.path.01Conv2d",
                        "override.path.02SequentialBlock/01Linear",
                        "override.class.ai.djl.nn.norm.LayerNorm",
                        "override.class.io.github.djlamp.amp.policy.TestBlocks$MyLinear"),
                List.copyOf(map.keySet()));
        assertEquals("mixed_bfloat16", map.get("policy"));
        assertEquals("fp32", map.get("override.path.02SequentialBlock/01Linear"));
        assertEquals("low", map.get("override.class.ai.djl.nn.norm.LayerNorm"));
        assertEquals(WITH_OVERRIDES, PrecisionPolicy.fromMap(map));
        assertEquals(Map.of("policy", "auto"), PrecisionPolicy.auto().toMap());
        assertEquals(PrecisionPolicy.auto(), PrecisionPolicy.fromMap(Map.of("policy", "auto")));
        assertEquals(
                PrecisionPolicy.builder(PrecisionPolicy.mixedFloat16())
                        .overrideClass(SequentialBlock.class, CastCategory.FP32)
                        .build(),
                PrecisionPolicy.fromMap(
                        Map.of(
                                "policy", "FP16",
                                "override.class.ai.djl.nn.SequentialBlock", "Fp32")));
    }

    @Test
    void propertiesReadAsTheMapForm() throws Exception {
        Properties file = new Properties();
        file.load(
                new java.io.StringReader(
                        "policy=mixed_bfloat16\n"
                                + "override.path.02SequentialBlock/01Linear=fp32\n"
                                + "override.path.01Conv2d=pass_through\n"
                                + "override.class.ai.djl.nn.norm.LayerNorm=low\n"
                                + "override.class.io.github.djlamp.amp.policy.TestBlocks$MyLinear"
                                + "=pass_through\n"));
        assertEquals(WITH_OVERRIDES, PrecisionPolicy.fromProperties(file));
        Properties withDefaults = new Properties(file);
        assertEquals(
                PrecisionPolicy.fromProperties(file), PrecisionPolicy.fromProperties(withDefaults));
        assertThrows(
                IllegalArgumentException.class,
                () -> PrecisionPolicy.fromProperties(new Properties()));
    }

    @Test
    void fromMapRejectsBadEntries() {
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> PrecisionPolicy.fromMap(Map.of("override.path.a", "fp32")));
        assertTrue(e.getMessage().contains("no 'policy' key"), e.getMessage());
        assertTrue(e.getMessage().contains("mixed_float16"), e.getMessage());

        e =
                assertThrows(
                        IllegalArgumentException.class,
                        () ->
                                PrecisionPolicy.fromMap(
                                        Map.of("policy", "bf16", "overide.path.a", "fp32")));
        assertTrue(e.getMessage().contains("Unknown precision policy config key 'overide.path.a'"));
        assertTrue(e.getMessage().contains("'override.path.<path>'"), e.getMessage());

        e =
                assertThrows(
                        IllegalArgumentException.class,
                        () ->
                                PrecisionPolicy.fromMap(
                                        Map.of("policy", "bf16", "override.path.a", "x")));
        assertTrue(e.getMessage().contains("Config key 'override.path.a'"), e.getMessage());
        assertTrue(e.getMessage().contains("low, fp32, pass_through"), e.getMessage());

        e =
                assertThrows(
                        IllegalArgumentException.class,
                        () ->
                                PrecisionPolicy.fromMap(
                                        Map.of("policy", "bf16", "override.class.x.Y", "fp32")));
        assertTrue(e.getMessage().contains("Unknown block class 'x.Y'"), e.getMessage());

        e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> PrecisionPolicy.fromMap(Map.of("policy", "float64")));
        assertTrue(e.getMessage().contains("Unknown precision policy 'float64'"), e.getMessage());

        Map<String, String> nullValue = new java.util.HashMap<>();
        nullValue.put("policy", null);
        e = assertThrows(IllegalArgumentException.class, () -> PrecisionPolicy.fromMap(nullValue));
        assertTrue(e.getMessage().contains("'policy' has no value"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> PrecisionPolicy.fromMap(null));
    }

    @Test
    void aModelsPropertiesReadAsTheyAre() {
        java.util.Properties properties = new java.util.Properties();
        properties.setProperty("policy", "mixed_float16");
        properties.setProperty("override.path.a", "fp32");
        properties.setProperty("djl-amp.scaler", "scale=1024.0");
        properties.setProperty("Epoch", "3");
        PrecisionPolicy policy = PrecisionPolicy.fromProperties(properties);
        assertEquals("mixed_float16[path:a=fp32]", policy.toString());
    }

    @Test
    void aTrustedClassReadsBackFromItsStringAndResolvesToLow() {
        PrecisionPolicy built =
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .trust(ai.djl.nn.core.Linear.class)
                        .build();
        assertEquals("mixed_bfloat16[class:ai.djl.nn.core.Linear=trusted]", built.toString());
        assertEquals(built, PrecisionPolicy.parse(built.toString()));
        assertEquals(built, PrecisionPolicy.fromMap(built.toMap()));
        ai.djl.nn.Block linear = ai.djl.nn.core.Linear.builder().setUnits(2).build();
        assertEquals(CastCategory.LOW, built.categoryOf(linear, "01Linear"));
        assertTrue(built.trusts(linear, "01Linear"));
    }
}
