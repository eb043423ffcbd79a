/**
 * The shadow stages of the strategies that run a block other than as one cast leaf: not part of
 * djl-amp's API (amp-core's module descriptor does not export this package).
 *
 * <p>{@link io.github.djlamp.amp.cast.strategy.MirroredComposite} and its four ({@link
 * io.github.djlamp.amp.cast.strategy.AttentionShadow}, {@link
 * io.github.djlamp.amp.cast.strategy.TransformerEncoderShadow}, {@link
 * io.github.djlamp.amp.cast.strategy.BertShadow}, {@link
 * io.github.djlamp.amp.cast.strategy.BertPretrainingShadow}) are DJL's composite forwards run layer
 * by layer through the shadows of their children ({@code policy.BlockPlan.Strategy.COMPOSITE});
 * {@link io.github.djlamp.amp.cast.strategy.AutocastStage} is a block the engine's own autocast
 * runs whole ({@code ENGINE_AUTOCAST}). {@link io.github.djlamp.amp.cast.strategy.ShadowBlock} is
 * the base of every stage that stands for one block of the user's tree, {@code cast}'s {@code
 * PrecisionStage} included. What the stages need of the wrapper comes through two seams {@code
 * cast} implements: {@link io.github.djlamp.amp.cast.strategy.StageStore} (the forward pass's
 * casting parameter store) and {@link io.github.djlamp.amp.cast.strategy.StageRelease} (dropping
 * the handles to what a stage consumed). It imports nothing of {@code cast}: {@code cast}'s shadow
 * tree builds these stages from the plan.
 */
package io.github.djlamp.amp.cast.strategy;
