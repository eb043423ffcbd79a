package io.github.djlamp.bench.train;

import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.training.TrainingConfig;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.verify.KernelVerification;
import java.util.ArrayList;
import java.util.List;

/** One way of training a network in DJL: plain fp32, or through djl-amp. */
public enum Variant {
    /** Plain DJL, fp32. */
    FP32("djl-fp32", "DJL fp32") {
        @Override
        Block wrap(Block block) {
            return block;
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return config;
        }
    },
    /** djl-amp, policy mixed_bfloat16, channels-last 16-bit activations (the default). */
    AMP_BF16("djl-amp-bf16", "djl-amp bf16, channels-last, per-parameter optimizer update") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(block, PrecisionPolicy.named("mixed_bfloat16"));
        }
    },
    /**
     * djl-amp bf16 as {@link #AMP_BF16} with {@code KernelVerification.OFF}: no 16-bit kernel is
     * checked against fp32 at its first use, what the first step of {@link #AMP_BF16} is compared
     * with.
     */
    AMP_BF16_UNCHECKED(
            "djl-amp-bf16-unchecked",
            "djl-amp bf16, channels-last, KernelVerification.OFF, per-parameter optimizer update") {
        @Override
        Block wrap(Block block) {
            return Amp.wrap(block, "mixed_bfloat16", KernelVerification.OFF);
        }
    },
    /**
     * djl-amp bf16 (channels-last) with {@code Checkpointing.stages()}: every child of the
     * network's SequentialBlock (ResNet's stem layers and residual units, each encoder block) a
     * segment, recomputed after backward.
     */
    AMP_BF16_CKPT_STAGES(
            "djl-amp-bf16-ckpt-stages", "djl-amp bf16, channels-last, Checkpointing.stages()") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(block, PrecisionPolicy.named("mixed_bfloat16"));
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return checkpointed(config, wrapped, Checkpointing.stages());
        }
    },
    /**
     * {@link #AMP_BF16_CKPT_STAGES} with {@code KernelVerification.OFF}: the first step of the
     * checkpointed run without the kernel checks.
     */
    AMP_BF16_CKPT_STAGES_UNCHECKED(
            "djl-amp-bf16-ckpt-stages-unchecked",
            "djl-amp bf16, channels-last, Checkpointing.stages(), KernelVerification.OFF") {
        @Override
        Block wrap(Block block) {
            return Amp.wrap(block, "mixed_bfloat16", KernelVerification.OFF);
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return checkpointed(config, wrapped, Checkpointing.stages());
        }
    },
    /**
     * djl-amp bf16 (channels-last) with {@code Checkpointing.auto()}: segments of about the square
     * root of the number of stages.
     */
    AMP_BF16_CKPT_AUTO(
            "djl-amp-bf16-ckpt-auto", "djl-amp bf16, channels-last, Checkpointing.auto()") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(block, PrecisionPolicy.named("mixed_bfloat16"));
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return checkpointed(config, wrapped, Checkpointing.auto());
        }
    },
    /**
     * djl-amp bf16 with every {@code LambdaBlock} in fp32: what a network whose activations are
     * lambdas cost before djl-amp read them ({@code .add(Activation::relu)} in d2l-java's style),
     * each an fp32 island with a cast on either side.
     */
    AMP_BF16_LAMBDAS_FP32(
            "djl-amp-bf16-lambdas-fp32", "djl-amp bf16, every LambdaBlock in fp32 (islands)") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(
                    block,
                    PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                            .overrideClass(LambdaBlock.class, CastCategory.FP32)
                            .build());
        }
    },
    /** djl-amp, policy mixed_bfloat16, 16-bit activations in the layout DJL made them (NCHW). */
    AMP_BF16_NCHW("djl-amp-bf16-nchw", "djl-amp bf16, MemoryLayout.PRESERVE (NCHW)") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(
                    block, PrecisionPolicy.named("mixed_bfloat16"), MemoryLayout.PRESERVE);
        }
    },
    /** djl-amp, policy mixed_float16 (dynamic loss scaling), channels-last 16-bit activations. */
    AMP_FP16(
            "djl-amp-fp16",
            "djl-amp fp16 dynamic scaling, channels-last, per-parameter optimizer update") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(block, PrecisionPolicy.named("mixed_float16"));
        }
    },
    /** djl-amp, policy mixed_float16 (dynamic loss scaling), NCHW activations. */
    AMP_FP16_NCHW(
            "djl-amp-fp16-nchw", "djl-amp fp16 dynamic scaling, MemoryLayout.PRESERVE (NCHW)") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(
                    block, PrecisionPolicy.named("mixed_float16"), MemoryLayout.PRESERVE);
        }
    },
    /**
     * djl-amp bf16 with PyTorch's fused optimizer kernels: one launch for all parameters instead of
     * DJL's per-parameter update (SGD, Adam and AdamW; others keep DJL's).
     */
    AMP_BF16_FUSED(
            "djl-amp-bf16-fused",
            "djl-amp bf16, fused optimizer step (the default on one device)") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(block, PrecisionPolicy.named("mixed_bfloat16"));
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return Amp.configure(config, wrapped, options(FusedOptimizer.ON).build());
        }
    },
    /**
     * {@link #AMP_BF16_FUSED} with {@code KernelVerification.OFF}: the GPU default without the
     * kernel checks, what its first step (time, and the device memory kept after it) is compared
     * with.
     */
    AMP_BF16_FUSED_UNCHECKED(
            "djl-amp-bf16-fused-unchecked",
            "djl-amp bf16, fused optimizer step, KernelVerification.OFF") {
        @Override
        Block wrap(Block block) {
            return Amp.wrap(block, "mixed_bfloat16", KernelVerification.OFF);
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return Amp.configure(config, wrapped, options(FusedOptimizer.ON).build());
        }
    },
    /**
     * {@link #AMP_BF16_FUSED} with {@code Checkpointing.stages()}: the GPU default trading
     * recomputation for activation memory: the largest batch under a memory cap is searched for it
     * and for the default without checkpointing.
     */
    AMP_BF16_FUSED_CKPT_STAGES(
            "djl-amp-bf16-fused-ckpt-stages",
            "djl-amp bf16, fused optimizer step, Checkpointing.stages()") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(block, PrecisionPolicy.named("mixed_bfloat16"));
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return Amp.configure(
                    config,
                    wrapped,
                    options(FusedOptimizer.ON).checkpointing(Checkpointing.stages()).build());
        }
    },
    /**
     * djl-amp fp16 with PyTorch's fused optimizer kernels and the loss scaler's state on the
     * device: the skip is decided on the device, with no host read per step.
     */
    AMP_FP16_FUSED(
            "djl-amp-fp16-fused",
            "djl-amp fp16 dynamic scaling, fused optimizer step, scaler state on the device (the default on one device)") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(block, PrecisionPolicy.named("mixed_float16"));
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return Amp.configure(config, wrapped, options(FusedOptimizer.ON).build());
        }
    },
    /**
     * {@link #AMP_BF16_FUSED} in a custom loop whose step is captured into a CUDA graph after 3
     * warm-up steps and replayed ({@code AmpSession.captureStep}; eager where it refuses).
     */
    AMP_BF16_FUSED_CAPTURED(
            "djl-amp-bf16-fused-captured",
            "djl-amp bf16, fused optimizer step, step captured and replayed (CUDA graph)") {
        @Override
        Block wrap(Block block) {
            return AMP_BF16_FUSED.wrap(block);
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return AMP_BF16_FUSED.configure(config, wrapped);
        }
    },
    /**
     * {@link #AMP_FP16_FUSED} with its step captured and replayed, as {@link
     * #AMP_BF16_FUSED_CAPTURED}.
     */
    AMP_FP16_FUSED_CAPTURED(
            "djl-amp-fp16-fused-captured",
            "djl-amp fp16 dynamic scaling, fused optimizer step, step captured and replayed (CUDA graph)") {
        @Override
        Block wrap(Block block) {
            return AMP_FP16_FUSED.wrap(block);
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return AMP_FP16_FUSED.configure(config, wrapped);
        }
    },
    /**
     * djl-amp's lean fp32: policy float32 (nothing cast, no loss scaling), DJL's per-parameter
     * optimizer update.
     */
    AMP_FP32("djl-amp-fp32", "djl-amp float32 policy, per-parameter optimizer update") {
        @Override
        Block wrap(Block block) {
            return Amp.wrap(block, "float32");
        }
    },
    /**
     * djl-amp's lean fp32 with the compiled forward off: every block's forward an engine call of
     * its own, what {@link #AMP_FP32} (compiled by default) is compared with.
     */
    AMP_FP32_EAGER("djl-amp-fp32-eager", "djl-amp float32 policy, compiled forward off") {
        @Override
        Block wrap(Block block) {
            return Amp.wrap(block, "float32").compileForward(false);
        }
    },
    /** {@link #AMP_BF16_FUSED} with the compiled forward off, what the default is compared with. */
    AMP_BF16_FUSED_EAGER(
            "djl-amp-bf16-fused-eager",
            "djl-amp bf16, fused optimizer step, compiled forward off") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(block, PrecisionPolicy.named("mixed_bfloat16"))
                    .compileForward(false);
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return Amp.configure(config, wrapped, options(FusedOptimizer.ON).build());
        }
    },
    /** djl-amp's lean fp32 (policy float32) with PyTorch's fused optimizer kernels. */
    AMP_FP32_FUSED("djl-amp-fp32-fused", "djl-amp float32 policy, fused optimizer step") {
        @Override
        Block wrap(Block block) {
            return Amp.wrap(block, "float32");
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return Amp.configure(config, wrapped, options(FusedOptimizer.ON).build());
        }
    },
    /**
     * djl-amp fp16 with {@code FusedOptimizer.AUTO}: fused optimizer steps on one device; on the
     * CPU the scaler's state is read on the host every step.
     */
    AMP_FP16_AUTO(
            "djl-amp-fp16-auto",
            "djl-amp fp16 dynamic scaling, FusedOptimizer.AUTO (on the CPU: fused, scaler read every step)") {
        @Override
        Block wrap(Block block) {
            return new MixedPrecisionBlock(block, PrecisionPolicy.named("mixed_float16"));
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return Amp.configure(config, wrapped, options(FusedOptimizer.AUTO).build());
        }
    },
    /**
     * djl-amp's machinery with fp32 compute: policy float32 and dynamic loss scaling, so the scaled
     * loss, the fused unscale-and-check, the scale update, the listener and the optimizer decorator
     * all run every step while the arithmetic is plain DJL's.
     */
    AMP_FP32_BOOKKEEPING(
            "djl-amp-fp32-dynamic", "djl-amp machinery, fp32 compute, LossScaling.dynamic()") {
        @Override
        Block wrap(Block block) {
            return Amp.wrap(block, "float32");
        }

        @Override
        TrainingConfig configure(TrainingConfig config, Block wrapped) {
            return Amp.configure(
                    config,
                    wrapped,
                    options(FusedOptimizer.OFF).lossScaling(LossScaling.dynamic()).build());
        }
    };

    private final String key;
    private final String label;

    Variant(String key, String label) {
        this.key = key;
        this.label = label;
    }

    /**
     * Returns the name used on the command line and in result files.
     *
     * @return e.g. {@code djl-amp-bf16}
     */
    public String key() {
        return key;
    }

    /**
     * Returns the description shown in result tables.
     *
     * @return the label
     */
    public String label() {
        return label;
    }

    /**
     * Whether the rig runs the step through {@code AmpSession.captureStep} instead of EasyTrain's
     * {@code trainBatch} and {@code trainer.step()}.
     */
    boolean capturesStep() {
        return this == AMP_BF16_FUSED_CAPTURED || this == AMP_FP16_FUSED_CAPTURED;
    }

    /** Returns the block to set on the model. */
    abstract Block wrap(Block block);

    /**
     * Returns the configuration to create the trainer from: DJL's per-parameter optimizer update
     * unless the variant says fused, so that each variant measures one thing on every device (the
     * default would fuse on a GPU).
     */
    TrainingConfig configure(TrainingConfig config, Block wrapped) {
        return Amp.configure(config, wrapped, options(FusedOptimizer.OFF).build());
    }

    private static TrainingConfig checkpointed(
            TrainingConfig config, Block wrapped, Checkpointing checkpointing) {
        return Amp.configure(
                config, wrapped, options(FusedOptimizer.OFF).checkpointing(checkpointing).build());
    }

    private static AmpOptions.Builder options(FusedOptimizer fused) {
        return AmpOptions.builder().fusedOptimizer(fused);
    }

    /**
     * Finds a variant by its key.
     *
     * @param key e.g. {@code djl-fp32}
     * @return the variant
     * @throws IllegalArgumentException when no variant has that key
     */
    public static Variant of(String key) {
        for (Variant v : values()) {
            if (v.key.equals(key)) {
                return v;
            }
        }
        List<String> keys = new ArrayList<>();
        for (Variant v : values()) {
            keys.add(v.key);
        }
        throw new IllegalArgumentException("Unknown variant '" + key + "'; use one of " + keys);
    }

    /**
     * Parses a comma-separated list of variant keys.
     *
     * @param keys e.g. {@code djl-fp32,djl-amp-bf16}
     * @return the variants in order
     */
    public static List<Variant> listOf(String keys) {
        List<Variant> result = new ArrayList<>();
        for (String k : keys.split(",")) {
            if (!k.isBlank()) {
                result.add(of(k.trim()));
            }
        }
        if (result.isEmpty()) {
            throw new IllegalArgumentException("No variant given: '" + keys + "'");
        }
        return result;
    }
}
