package io.github.djlamp.amp.policy;

import java.util.Locale;

/**
 * How djl-amp runs one block: the precision its inputs are cast to and whether its parameters are
 * cast.
 *
 * <p>A {@link PrecisionPolicy} assigns a category to every block (see {@link
 * PrecisionPolicy#categoryOf(ai.djl.nn.Block, String)}). The three leaf categories can be set by
 * overrides and are written {@code low}, {@code fp32} and {@code pass_through} in policy strings
 * and config maps, and {@code trusted} (LOW on the user's word) and {@code autocast} (whole under
 * the engine's autocast, checked); {@link #CONTAINER} is assigned by djl-amp only.
 */
public enum CastCategory {
    /**
     * Computes in the policy's compute precision (fp16 or bf16): floating-point inputs are cast to
     * it, and the block's {@code WEIGHT} and {@code BIAS} parameters are cast to it for the forward
     * pass while their fp32 masters are what the optimizer updates. These are the operations
     * PyTorch's autocast puts on its lower-precision list: convolutions and linear layers, where
     * 16-bit matrix units pay off. Under a policy whose compute precision is fp32 this category
     * resolves to {@link #FP32}.
     */
    LOW("low"),

    /**
     * Computes in fp32: floating-point inputs are cast to fp32 and parameters are left untouched.
     * For blocks that are numerically sensitive or unsafe on 16-bit arrays: layer normalization,
     * anything that may call softmax or log-softmax, embeddings, recurrent layers, losses, and
     * every block djl-amp does not know.
     */
    FP32("fp32"),

    /**
     * Runs in whatever precision its input arrives in; nothing is cast, neither inputs nor
     * parameters. For blocks that work on 16-bit input as they are: batch normalization (its fp32
     * statistics and affine parameters accept 16-bit input), element-wise activations, pooling,
     * dropout and reshapes such as flatten.
     */
    PASS_THROUGH("pass_through"),

    /**
     * {@link #LOW}, on the user's word that the block is safe on bf16 arrays, as {@link
     * LowPrecisionSafe} says it for a class its author can change: for a class of someone else's
     * (d2l-java's {@code Residual}), one override at the {@code Amp.wrap} call, {@code
     * mixed_bfloat16[class:com.example.Residual=trusted]}. The blocks inside it are still checked
     * as a {@code LowPrecisionSafe} block's are, its own code is the user's responsibility as
     * {@link LowPrecisionSafe} describes, and its first bf16 forward is announced with the same
     * INFO line. Resolves to {@link #LOW} in {@link PrecisionPolicy#categoryOf}.
     */
    TRUSTED("trusted"),

    /**
     * The block runs whole under the engine's own autocast ({@code
     * mixed_float16[class:com.example.EncoderDecoder=autocast]}), which casts each operation's
     * operands as it runs (matrix products in 16 bits, softmax and reductions in fp32): for a
     * composite of the user's own whose code djl-amp cannot read (it calls methods of its own
     * children) and which a 16-bit unit cannot run (its code makes fp32 arrays that meet the unit's
     * 16-bit ones). Its first forward of each input signature is checked whole against fp32,
     * forward and backward, as the engine's other autocast blocks are; a failure runs it in fp32.
     * Under bf16 it is refused at the wrapper's first forward unless the block's class implements
     * {@link LowPrecisionSafe}: DJL's PyTorch engine terminates the JVM where unread code calls
     * softmax on a bf16 array. Resolves to {@link #LOW} in {@link PrecisionPolicy#categoryOf}.
     */
    AUTOCAST("autocast"),

    /**
     * A block djl-amp does not run as a unit but descends into, resolving each child on its own:
     * {@link ai.djl.nn.SequentialBlock} and {@link ai.djl.nn.ParallelBlock}, whose forward pass
     * only hands the same inputs and parameter store on to their children; DJL's transformer
     * blocks, run layer by layer ({@link KnownComposites}); and a block whose forward djl-amp reads
     * as safe, holding a child that is not safe in 16 bits (DJL's YOLOv3), whose own code runs over
     * its children ({@link DefaultCastRules#isReadOverChildren}). Never set by overrides; an
     * override on a container makes the whole container one unit of the overriding category.
     */
    CONTAINER("container");

    private final String configName;

    CastCategory(String configName) {
        this.configName = configName;
    }

    /**
     * Returns the name used in policy strings and config maps: {@code low}, {@code fp32}, {@code
     * pass_through} or {@code container}.
     *
     * @return the config name
     */
    public String configName() {
        return configName;
    }

    /**
     * Returns whether an override may assign this category, i.e. whether it is a leaf category.
     *
     * @return false for {@link #CONTAINER} only
     */
    public boolean isOverridable() {
        return this != CONTAINER;
    }

    /**
     * Returns the precision floating-point inputs of a block in this category are cast to.
     *
     * @param computePrecision the policy's compute precision
     * @return {@code computePrecision} for {@link #LOW}, FP32 for {@link #FP32}, and null (no cast)
     *     for {@link #PASS_THROUGH} and {@link #CONTAINER}
     */
    public Precision inputPrecision(Precision computePrecision) {
        return switch (this) {
            case LOW, TRUSTED, AUTOCAST -> computePrecision;
            case FP32 -> Precision.FP32;
            case PASS_THROUGH, CONTAINER -> null;
        };
    }

    /**
     * Parses an overridable category name: {@code low}, {@code fp32} or {@code pass_through}, in
     * any case.
     *
     * @param name the name
     * @return the category
     * @throws IllegalArgumentException naming the valid names when {@code name} is not one, or when
     *     it names {@link #CONTAINER}, which only djl-amp assigns
     */
    public static CastCategory parse(String name) {
        String key = name == null ? "" : name.trim().toLowerCase(Locale.ROOT);
        for (CastCategory category : values()) {
            if (category.configName.equals(key)) {
                if (!category.isOverridable()) {
                    throw new IllegalArgumentException(
                            "Cast category 'container' cannot be set: djl-amp assigns it to"
                                    + " the blocks it descends into (SequentialBlock,"
                                    + " ParallelBlock, blocks whose forward it reads); valid"
                                    + " categories are "
                                    + validNames());
                }
                return category;
            }
        }
        throw new IllegalArgumentException(
                "Unknown cast category '" + name + "'; valid categories are " + validNames());
    }

    /**
     * Returns the overridable category names, for messages.
     *
     * @return {@code low, fp32, pass_through, trusted, autocast}
     */
    static String validNames() {
        return LOW.configName
                + ", "
                + FP32.configName
                + ", "
                + PASS_THROUGH.configName
                + ", "
                + TRUSTED.configName
                + ", "
                + AUTOCAST.configName;
    }
}
