/**
 * What computes in which precision: the precisions djl-amp knows ({@link
 * io.github.djlamp.amp.policy.Precision}) and the policy that assigns one to every block of a
 * model. This package depends on no other package of djl-amp.
 *
 * <p>A {@link io.github.djlamp.amp.policy.PrecisionPolicy} is a named value, like a Keras dtype
 * policy: {@code mixed_float16}, {@code mixed_bfloat16}, {@code float32}, or {@code auto} (chosen
 * per device), plus optional overrides by block path or block class. It gives each block a {@link
 * io.github.djlamp.amp.policy.CastCategory}: compute in the low precision, compute in fp32, pass
 * the input's precision through, or descend into the block's children. The defaults, modelled on
 * PyTorch autocast's operator lists, are the table in {@link
 * io.github.djlamp.amp.policy.DefaultCastRules}; blocks are addressed by the paths {@link
 * io.github.djlamp.amp.policy.BlockPaths} gives them. {@link io.github.djlamp.amp.policy.ModelPlan}
 * decides, once per tree and concrete policy, what djl-amp does with each block it visits ({@link
 * io.github.djlamp.amp.policy.BlockPlan}); the wrapper's shadow tree, its summary, its warnings and
 * trust breadcrumbs, and the alignment report read that plan.
 *
 * <h2>String form</h2>
 *
 * <p>{@code PrecisionPolicy.toString()} writes and {@code PrecisionPolicy.parse(String)} reads
 *
 * <pre>
 * policy   := NAME [ '[' override { ',' override } ']' ]
 * override := 'path:' PATH '=' CATEGORY | 'class:' CLASS '=' CATEGORY
 * </pre>
 *
 * where NAME is a policy name or alias accepted by {@code PrecisionPolicy.named(String)}, PATH a
 * block path as {@link io.github.djlamp.amp.policy.BlockPaths} writes it, CLASS a binary class name
 * ({@link java.lang.Class#getName()}) and CATEGORY one of {@code low}, {@code fp32}, {@code
 * pass_through}, {@code trusted}. In a PATH, {@code \} escapes the next character; {@code
 * toString()} escapes {@code \ , = [ ]}. Spaces around names, overrides and categories are ignored.
 * Path overrides are written first, sorted by path, then class overrides sorted by class name; for
 * example {@code
 * mixed_bfloat16[path:02SequentialBlock/01Linear=fp32,class:ai.djl.nn.norm.LayerNorm=low]}.
 *
 * <h2>Map form</h2>
 *
 * <p>{@code PrecisionPolicy.toMap()} writes and {@code fromMap(Map)} and {@code
 * fromProperties(Properties)} read, for config files, the key {@code policy} holding the name and
 * one key per override: {@code override.path.<PATH>} or {@code override.class.<CLASS>}, each
 * holding a category name.
 */
package io.github.djlamp.amp.policy;
