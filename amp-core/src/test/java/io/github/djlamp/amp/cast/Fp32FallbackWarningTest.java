package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import org.junit.jupiter.api.Test;

/** The one-line change the fallback WARN suggests for the unit with the most fp32 arithmetic. */
class Fp32FallbackWarningTest {

    private static String adviceFor(String policyName) {
        SequentialBlock model =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(8).build())
                        .add(Linear.builder().setUnits(2).build());
        PrecisionPolicy policy = PrecisionPolicy.parse(policyName);
        ModelPlan plan = ModelPlan.of(policy, model, block -> false);
        ArithmeticShare share = new ArithmeticShare(Precision.BF16);
        share.recordProduct("01Linear", "Linear", Precision.FP32, 9000);
        share.recordProduct("02Linear", "Linear", Precision.BF16, 1000);
        return Fp32FallbackWarning.advice(plan, share.getFp32Units());
    }

    /** A layer the user's own override keeps in fp32: vouching for its class would not help. */
    @Test
    void anOverriddenLayerIsToldToDropTheOverride() {
        String name = "mixed_bfloat16[path:01Linear=fp32]";
        assertEquals(
                "'01Linear' runs in fp32 because an override in the policy \""
                        + name
                        + "\" says so: remove that override to compute it in bfloat16.",
                adviceFor(name));
    }

    /** A layer the policy keeps in fp32 by its own rule: the usual advice. */
    @Test
    void aLayerThatRanInFp32ForAnotherReasonGetsTheUsualAdvice() {
        String advice = adviceFor("mixed_bfloat16");
        assertTrue(advice.contains("LowPrecisionSafe") && advice.contains("=trusted]"), advice);
    }
}
