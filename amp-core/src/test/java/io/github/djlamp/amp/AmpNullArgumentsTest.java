package io.github.djlamp.amp;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.nn.Block;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.loss.Loss;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.verify.KernelVerification;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** A null at a public entry point is named, with the call to make instead. */
class AmpNullArgumentsTest {

    private static Block linear() {
        return Linear.builder().setUnits(2).build();
    }

    private static void assertNamed(Class<? extends Throwable> type, Executable call, String... m) {
        Throwable e = assertThrows(type, call);
        for (String part : m) {
            assertTrue(e.getMessage().contains(part), e.getMessage());
        }
    }

    @Test
    void wrapNamesANullBlockAndTheFix() {
        String[] expected = {"Amp.wrap needs the model's block, got null", "model.setBlock"};
        assertNamed(NullPointerException.class, () -> Amp.wrap(null, "auto"), expected);
        assertNamed(
                NullPointerException.class, () -> Amp.wrap(null, PrecisionPolicy.auto()), expected);
        assertNamed(
                NullPointerException.class,
                () -> Amp.wrap(null, "auto", KernelVerification.OFF),
                expected);
        assertNamed(NullPointerException.class, () -> Amp.wrap(null, (String) null), expected);
    }

    @Test
    void wrapNamesANullPolicyAndTheFix() {
        assertNamed(
                NullPointerException.class,
                () -> Amp.wrap(linear(), (PrecisionPolicy) null),
                "Amp.wrap needs a precision policy, got null",
                "PrecisionPolicy.auto()");
        assertNamed(
                IllegalArgumentException.class,
                () -> Amp.wrap(linear(), (String) null),
                "Amp.wrap needs a policy name, got null",
                "\"auto\"");
        assertNamed(
                IllegalArgumentException.class,
                () -> Amp.wrap(linear(), null, KernelVerification.ON),
                "Amp.wrap needs a policy name, got null");
        assertNamed(
                NullPointerException.class,
                () -> Amp.wrap(linear(), "auto", null),
                "KernelVerification.ON",
                "got null");
    }

    @Test
    void configureNamesANullConfigOrOptions() {
        MixedPrecisionBlock wrapped = Amp.wrap(linear(), "mixed_bfloat16");
        assertNamed(
                NullPointerException.class,
                () -> Amp.configure(null, wrapped),
                "Amp.configure needs the program's TrainingConfig, got null");
        assertNamed(
                NullPointerException.class,
                () ->
                        Amp.configure(
                                new DefaultTrainingConfig(Loss.l2Loss()),
                                wrapped,
                                (AmpOptions) null),
                "Amp.configure needs AmpOptions, got null",
                "AmpOptions.defaults()");
    }

    @Test
    void theConstructorNamesEachNullArgument() {
        PrecisionPolicy bf16 = PrecisionPolicy.mixedBfloat16();
        assertNamed(
                NullPointerException.class,
                () -> new MixedPrecisionBlock(null, bf16),
                "MixedPrecisionBlock needs the block to wrap, got null");
        assertNamed(
                NullPointerException.class,
                () -> new MixedPrecisionBlock(linear(), null),
                "MixedPrecisionBlock needs a precision policy, got null",
                "PrecisionPolicy.auto()");
        assertNamed(
                NullPointerException.class,
                () -> new MixedPrecisionBlock(linear(), bf16, null),
                "MixedPrecisionBlock needs a memory layout, got null",
                "MemoryLayout.CHANNELS_LAST");
        assertNamed(
                NullPointerException.class,
                () -> new MixedPrecisionBlock(linear(), bf16, MemoryLayout.PRESERVE, null),
                "MixedPrecisionBlock needs a kernel verification setting, got null",
                "KernelVerification.ON");
    }

    private static AmpSession session() {
        return Amp.configure(
                        new DefaultTrainingConfig(Loss.l2Loss()),
                        Amp.wrap(linear(), "mixed_bfloat16"))
                .getSession();
    }

    @Test
    void sessionOfNamesANullTrainer() {
        assertNamed(
                NullPointerException.class,
                () -> AmpSession.of(null),
                "AmpSession.of needs the trainer, got null",
                "model.newTrainer(Amp.configure(config, block))");
    }

    @Test
    void scaleNamesANullLoss() {
        assertNamed(
                NullPointerException.class,
                () -> session().scale(null),
                "AmpSession.scale needs the step's loss, got null",
                "collector.backward(amp.scale(loss))");
    }

    @Test
    void saveOptimizerStateNamesANullFile() {
        assertNamed(
                NullPointerException.class,
                () -> session().saveOptimizerState((Path) null),
                "AmpSession.saveOptimizerState needs the file to write, got null",
                "pass a Path");
    }

    @Test
    void precisionSummaryNamesANullDeviceOrManager() {
        MixedPrecisionBlock wrapped = Amp.wrap(linear(), "mixed_bfloat16");
        assertNamed(
                NullPointerException.class,
                () -> wrapped.getPrecisionSummary(null, null),
                "MixedPrecisionBlock.getPrecisionSummary needs the device, got null",
                "trainer.getDevices()[0]");
        assertNamed(
                NullPointerException.class,
                () -> wrapped.getPrecisionSummary(Device.cpu(), null),
                "MixedPrecisionBlock.getPrecisionSummary needs a manager of the engine, got null",
                "model.getNDManager()");
        assertNamed(
                NullPointerException.class,
                () -> wrapped.resolvePolicy(null, null),
                "MixedPrecisionBlock.resolvePolicy needs the device, got null");
    }

    @Test
    void checkpointingFromPropertiesNamesNullProperties() {
        assertNamed(
                NullPointerException.class,
                () -> Checkpointing.fromProperties(null),
                "Checkpointing.fromProperties needs the Properties to read",
                "Checkpointing.none()");
    }

    @Test
    @SuppressWarnings("unchecked")
    void trustNamesANullArrayOrClass() {
        assertNamed(
                NullPointerException.class,
                () ->
                        PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                                .trust((Class<? extends Block>[]) null),
                "PrecisionPolicy.Builder.trust needs the block classes to trust, got null");
        assertNamed(
                NullPointerException.class,
                () ->
                        PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                                .trust(Linear.class, null),
                "PrecisionPolicy.Builder.trust got null as block class 2 of 2");
    }
}
