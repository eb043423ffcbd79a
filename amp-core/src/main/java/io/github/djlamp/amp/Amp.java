package io.github.djlamp.amp;

import ai.djl.nn.Block;
import ai.djl.training.TrainingConfig;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.SessionSettings;
import io.github.djlamp.amp.verify.KernelVerification;
import io.github.djlamp.amp.verify.RememberedVerdicts;
import java.util.Objects;

/**
 * The front door: mixed precision for an existing DJL training program in two lines.
 *
 * <pre>{@code
 * model.setBlock(Amp.wrap(block, "auto"));                        // line 1
 * TrainingConfig config = Amp.configure(userConfig, model.getBlock()); // line 2
 * }</pre>
 *
 * <p>"auto" picks bf16 on GPUs of compute capability 8.0 and later and on CPUs with AVX512-BF16 or
 * AMX, fp16 with dynamic loss scaling on Volta and Turing GPUs, and fp32 elsewhere.
 */
public final class Amp {

    private Amp() {}

    /**
     * Wraps a block to compute in mixed precision under a named policy.
     *
     * @param block the user's block
     * @param policyName {@code auto}, {@code mixed_bfloat16}, {@code mixed_float16} or {@code
     *     float32} (or a policy string with overrides, see {@link PrecisionPolicy#parse})
     * @return the wrapped block
     * @throws NullPointerException naming the argument that is null
     * @throws IllegalArgumentException when the policy name is null or unknown, or an override
     *     names no block
     */
    public static MixedPrecisionBlock wrap(Block block, String policyName) {
        requireBlock(block);
        return wrap(block, policyNamed(policyName));
    }

    /**
     * Wraps a block to compute in mixed precision.
     *
     * @param block the user's block
     * @param policy the precision policy
     * @return the wrapped block
     * @throws NullPointerException naming the argument that is null
     * @throws IllegalArgumentException when an override of the policy names no block
     */
    public static MixedPrecisionBlock wrap(Block block, PrecisionPolicy policy) {
        requireBlock(block);
        Objects.requireNonNull(
                policy,
                "Amp.wrap needs a precision policy, got null: pass PrecisionPolicy.auto() or a"
                        + " name, e.g. Amp.wrap(block, \"auto\")");
        return new MixedPrecisionBlock(block, policy);
    }

    /**
     * Wraps a block to compute in mixed precision, choosing whether its 16-bit kernels are checked
     * against fp32 at their first use ({@link KernelVerification#ON}, what the other {@code wrap}
     * methods do) or trusted ({@link KernelVerification#OFF}, for a platform already verified).
     *
     * @param block the user's block
     * @param policyName a policy name or string, as for {@link #wrap(Block, String)}
     * @param verification whether to check the kernels
     * @return the wrapped block
     * @throws NullPointerException naming the argument that is null
     * @throws IllegalArgumentException when the policy name is null or unknown, or an override
     *     names no block
     */
    public static MixedPrecisionBlock wrap(
            Block block, String policyName, KernelVerification verification) {
        requireBlock(block);
        PrecisionPolicy policy = policyNamed(policyName);
        Objects.requireNonNull(
                verification,
                "Amp.wrap needs KernelVerification.ON (what Amp.wrap(block, name) does) or"
                        + " KernelVerification.OFF, got null");
        return new MixedPrecisionBlock(block, policy, MemoryLayout.CHANNELS_LAST, verification);
    }

    private static void requireBlock(Block block) {
        Objects.requireNonNull(
                block,
                "Amp.wrap needs the model's block, got null: build or load the block first, then"
                        + " model.setBlock(Amp.wrap(block, \"auto\"))");
    }

    private static PrecisionPolicy policyNamed(String policyName) {
        if (policyName == null) {
            throw new IllegalArgumentException(
                    "Amp.wrap needs a policy name, got null: \"auto\", \"mixed_bfloat16\","
                            + " \"mixed_float16\" or \"float32\" (or a PrecisionPolicy)");
        }
        return PrecisionPolicy.parse(policyName);
    }

    /**
     * Adds mixed precision to a training configuration, with the precision's default loss scaling
     * (dynamic for fp16, none for bf16).
     *
     * @param config the user's training configuration
     * @param wrappedBlock the block returned by {@link #wrap}, set on the model
     * @return the configuration to create the trainer from
     * @throws NullPointerException when {@code config} is null
     * @throws AmpException when {@code wrappedBlock} is not a {@link MixedPrecisionBlock}
     */
    public static AmpTrainingConfig configure(TrainingConfig config, Block wrappedBlock) {
        return configure(config, wrappedBlock, AmpOptions.defaults());
    }

    /**
     * Adds mixed precision to a training configuration with explicit loss scaling.
     *
     * @param config the user's training configuration
     * @param wrappedBlock the block returned by {@link #wrap}, set on the model
     * @param scaling the loss scaling, or null for the precision's default
     * @return the configuration to create the trainer from
     * @throws NullPointerException when {@code config} is null
     * @throws AmpException when {@code wrappedBlock} is not a {@link MixedPrecisionBlock}
     */
    public static AmpTrainingConfig configure(
            TrainingConfig config, Block wrappedBlock, LossScaling scaling) {
        return configure(config, wrappedBlock, AmpOptions.builder().lossScaling(scaling).build());
    }

    /**
     * Adds mixed precision to a training configuration with explicit options. DJL's {@code
     * DivergenceCheckTrainingListener} among the configuration's listeners is replaced by an {@link
     * io.github.djlamp.amp.train.AmpDivergenceCheckTrainingListener}, so a step djl-amp skipped
     * does not read as divergence. The result drives one open trainer at a time.
     *
     * @param config the user's training configuration
     * @param wrappedBlock the block returned by {@link #wrap}, set on the model
     * @param options loss scaling and gradient accumulation
     * @return the configuration to create the trainer from
     * @throws NullPointerException naming the argument that is null
     * @throws AmpException when {@code wrappedBlock} is not a {@link MixedPrecisionBlock}
     */
    public static AmpTrainingConfig configure(
            TrainingConfig config, Block wrappedBlock, AmpOptions options) {
        Objects.requireNonNull(
                config,
                "Amp.configure needs the program's TrainingConfig, got null: pass the config the"
                        + " trainer would be made from, e.g. new DefaultTrainingConfig(loss)");
        Objects.requireNonNull(
                options,
                "Amp.configure needs AmpOptions, got null: pass AmpOptions.defaults() or"
                        + " AmpOptions.builder()...build(), or call Amp.configure(config, block)");
        if (!(wrappedBlock instanceof MixedPrecisionBlock)) {
            throw new AmpException(
                    "Amp.configure needs the block returned by Amp.wrap(...), set on the model;"
                            + " got "
                            + (wrappedBlock == null ? "null" : wrappedBlock.getClass().getName())
                            + ". Call model.setBlock(Amp.wrap(block, \"auto\")) first.");
        }
        MixedPrecisionBlock block = (MixedPrecisionBlock) wrappedBlock;
        RememberedVerdicts.use(options.getVerdictMemory(), options.getVerdictDirectory());
        // before the first training step: a cure of the environment must precede the first kernel
        AmpBackends.preparePlatform(options.isPlatformCureAllowed());
        block.getTrainingLink().getCheckpoints().apply(options.getCheckpointing());
        return new AmpTrainingConfig(config, new AmpSession(block, settings(options)));
    }

    /** What the session needs of the options; the fused setting is already settled in them. */
    private static SessionSettings settings(AmpOptions options) {
        FusedOptimizer fused = options.getFusedOptimizer();
        return new SessionSettings(
                options.getLossScaling(),
                options.getAccumulationSteps(),
                options.getHostSyncInterval(),
                options::readsEveryStepOn,
                fused::wantsFusedSteps,
                fused::wantsFusedStepsWhereOnlyFused);
    }
}
