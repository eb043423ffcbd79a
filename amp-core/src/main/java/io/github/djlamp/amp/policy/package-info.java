/**
 * What computes in which precision: the precisions djl-amp knows ({@link
 * io.github.djlamp.amp.policy.Precision}) and the policy that assigns one to every block of a
 * model.
 *
 * <p>A {@link io.github.djlamp.amp.policy.PrecisionPolicy} is a named value, like a Keras dtype
 * policy: {@code mixed_float16}, {@code mixed_bfloat16}, {@code float32}, or {@code auto} (chosen
 * per device), plus optional overrides by block path or block class. It gives each block a {@link
 * io.github.djlamp.amp.policy.CastCategory}: compute in the low precision, compute in fp32, pass
 * the input's precision through, or descend into the block's children. The defaults, modelled on
 * PyTorch autocast's operator lists, are the table in {@link
 * io.github.djlamp.amp.policy.DefaultCastRules}; blocks are addressed by the paths {@link
 * io.github.djlamp.amp.policy.BlockPaths} gives them.
 */
package io.github.djlamp.amp.policy;
