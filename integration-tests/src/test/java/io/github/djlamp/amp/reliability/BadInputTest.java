package io.github.djlamp.amp.reliability;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.loss.Loss;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.scale.LossScaling;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** Every invalid configuration is rejected when configured, saying what is wrong and allowed. */
class BadInputTest {

    private static Block mlp() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(8).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(2).build());
    }

    private static void assertRejected(Executable configure, String... words) {
        Throwable e = assertThrows(IllegalArgumentException.class, configure);
        for (String word : words) {
            assertTrue(e.getMessage().contains(word), "'" + word + "' in: " + e.getMessage());
        }
    }

    @Test
    void lossScalingSettings() {
        assertRejected(() -> LossScaling.dynamicBuilder().growthFactor(1.0), "growthFactor", "> 1");
        assertRejected(
                () -> LossScaling.dynamicBuilder().backoffFactor(1.5), "backoffFactor", "(0, 1)");
        assertRejected(() -> LossScaling.dynamicBuilder().backoffFactor(0), "backoffFactor");
        assertRejected(
                () -> LossScaling.dynamicBuilder().growthInterval(0), "growthInterval", ">= 1");
        assertRejected(
                () -> LossScaling.dynamicBuilder().initScale(0), "initScale", "[2^-24, 2^40]");
        assertRejected(
                () -> LossScaling.dynamicBuilder().initScale(Float.POSITIVE_INFINITY),
                "initScale",
                "2^40");
        assertRejected(() -> LossScaling.fixed(1e30f), "initScale", "every step overflows");
        assertRejected(() -> LossScaling.dynamicBuilder().initScale(Float.NaN), "initScale");
        assertRejected(
                () -> LossScaling.dynamicBuilder().minScale(10).maxScale(1).initScale(5).build(),
                "minScale",
                "maxScale");
        assertRejected(() -> AmpOptions.builder().accumulationSteps(0), "accumulationSteps");
    }

    @Test
    void policyNamesAndOverrides() {
        assertRejected(() -> Amp.wrap(mlp(), "mixed_float8"), "mixed_float8", "mixed_bfloat16");
        PrecisionPolicy ghost =
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .overridePath("07Linear", CastCategory.FP32)
                        .build();
        assertRejected(() -> Amp.wrap(mlp(), ghost), "07Linear", "01Linear");
        PrecisionPolicy noSuchClass =
                PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                        .overrideClass(ai.djl.nn.norm.LayerNorm.class, CastCategory.LOW)
                        .build();
        assertRejected(() -> Amp.wrap(mlp(), noSuchClass), "LayerNorm");
        assertRejected(() -> PrecisionPolicy.parse("mixed_bfloat16[path:01Linear=fp8]"), "fp8");
    }

    @Test
    void wrappingAndConfiguringTwiceOrNotAtAll() {
        Block wrapped = Amp.wrap(mlp(), "mixed_bfloat16");
        assertRejected(() -> Amp.wrap(wrapped, "mixed_bfloat16"), "already");
        DefaultTrainingConfig config = new DefaultTrainingConfig(Loss.l2Loss());
        AmpException notWrapped =
                assertThrows(AmpException.class, () -> Amp.configure(config, mlp()));
        assertTrue(notWrapped.getMessage().contains("Amp.wrap"), notWrapped.getMessage());
        assertRejected(() -> Amp.configure(Amp.configure(config, wrapped), wrapped), "already");
    }

    @Test
    void aTrainerForAnotherBlockIsRejected() {
        Block wrapped = Amp.wrap(mlp(), "mixed_bfloat16");
        try (Model model = Model.newInstance("other", "PyTorch")) {
            model.setBlock(Amp.wrap(mlp(), "mixed_bfloat16"));
            DefaultTrainingConfig config = new DefaultTrainingConfig(Loss.l2Loss());
            AmpException e =
                    assertThrows(
                            AmpException.class,
                            () -> model.newTrainer(Amp.configure(config, wrapped)));
            assertTrue(e.getMessage().contains("model.setBlock"), e.getMessage());
        }
    }
}
