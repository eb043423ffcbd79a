/**
 * The precision-casting block wrapper: 16-bit compute over fp32 master weights.
 *
 * <p>{@link io.github.djlamp.amp.cast.MixedPrecisionBlock} is the user's block in every respect
 * (parameters, names, initialization, saved files) except forward, which runs a shadow of the block
 * tree in which every leaf is a {@link io.github.djlamp.amp.cast.PrecisionStage}: it casts the
 * leaf's floating inputs to the precision the policy gives it and, for low-precision leaves, hands
 * it its WEIGHT and BIAS parameters cast once per step by a {@link
 * io.github.djlamp.amp.cast.internal.WeightCastCache}. {@link
 * io.github.djlamp.amp.cast.DevicePolicies} resolves the policy and builds the shadow for each
 * device; {@link io.github.djlamp.amp.cast.PrecisionSummary} says what computes in which precision.
 * A stage that computes in bf16 on someone's word (a {@code LowPrecisionSafe} block, a trusted
 * class) logs a {@link io.github.djlamp.amp.cast.TrustBreadcrumb} before its first forward. What
 * the wrapper shares with the trainer glue lives in {@code cast.internal}; activation
 * checkpointing, whose segments the shadow tree holds, in {@code cast.checkpoint}; the stages of
 * the mirrored composites and of the engine's own autocast, in {@code cast.strategy}.
 */
package io.github.djlamp.amp.cast;
