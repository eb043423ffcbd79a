package io.github.djlamp.amp.policy;

import ai.djl.nn.Block;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.TreeMap;

/**
 * Which precision each block of a model computes in: an immutable, named value in the manner of
 * Keras's dtype policies.
 *
 * <p>A policy has a name, a compute precision (what {@link CastCategory#LOW} blocks compute in), a
 * variable precision (what parameters are stored and updated in; always FP32 here) and optional
 * overrides. The presets are {@link #mixedFloat16()}, {@link #mixedBfloat16()}, {@link #float32()}
 * and {@link #auto()}, whose compute precision is decided per device from the precision the engine
 * layer recommends there ({@link #resolveAuto(Precision)}).
 *
 * <p>Each block gets a {@link CastCategory} from {@link #categoryOf(Block, String)}: a path
 * override for its path if there is one, else the class override for the most specific class of the
 * block that has one, else {@link DefaultCastRules}.
 *
 * <p>A policy reads back from its string form ({@link #parse(String)}) and its map form for config
 * files ({@link #fromMap(Map)}), specified in the {@linkplain io.github.djlamp.amp.policy package}.
 */
public final class PrecisionPolicy {

    private static final PrecisionPolicy MIXED_FLOAT16 = of(Preset.MIXED_FLOAT16);
    private static final PrecisionPolicy MIXED_BFLOAT16 = of(Preset.MIXED_BFLOAT16);
    private static final PrecisionPolicy FLOAT32 = of(Preset.FLOAT32);
    private static final PrecisionPolicy AUTO = of(Preset.AUTO);

    private final Preset preset;
    private final PolicyOverrides overrides;

    private PrecisionPolicy(Preset preset, PolicyOverrides overrides) {
        this.preset = preset;
        this.overrides = overrides;
    }

    private static PrecisionPolicy of(Preset preset) {
        return new PrecisionPolicy(preset, PolicyOverrides.NONE);
    }

    /**
     * Returns {@code mixed_float16}: convolutions and linear layers compute in fp16, which needs
     * loss scaling and is fast on GPUs with Tensor Cores.
     *
     * @return the preset
     */
    public static PrecisionPolicy mixedFloat16() {
        return MIXED_FLOAT16;
    }

    /**
     * Returns {@code mixed_bfloat16}: convolutions and linear layers compute in bf16, fast on CPUs
     * with AVX-512 BF16 and on recent GPUs.
     *
     * @return the preset
     */
    public static PrecisionPolicy mixedBfloat16() {
        return MIXED_BFLOAT16;
    }

    /**
     * Returns {@code float32}: everything computes in fp32 and nothing is cast (LOW resolves to
     * FP32).
     *
     * @return the preset
     */
    public static PrecisionPolicy float32() {
        return FLOAT32;
    }

    /**
     * Returns {@code auto}: the compute precision is chosen per device by {@link
     * #resolveAuto(Precision)}.
     *
     * @return the preset
     */
    public static PrecisionPolicy auto() {
        return AUTO;
    }

    /**
     * Returns the preset of a name: {@code mixed_float16}, {@code mixed_bfloat16}, {@code float32}
     * or {@code auto}, or the aliases {@code fp16} and {@code float16}, {@code bf16} and {@code
     * bfloat16}, {@code fp32}, in any case.
     *
     * @param name the name
     * @return the preset, without overrides
     * @throws IllegalArgumentException listing the valid names when {@code name} is not one
     */
    public static PrecisionPolicy named(String name) {
        return of(Preset.named(name));
    }

    /**
     * Parses the string form described in the package documentation, as {@link #toString()} writes
     * it.
     *
     * @param text the string form
     * @return the policy
     * @throws IllegalArgumentException naming the problem: an unknown policy name, category or
     *     class, a malformed override, or a path or class overridden twice
     */
    public static PrecisionPolicy parse(String text) {
        return PolicyFormat.parse(text);
    }

    /**
     * Reads the map form described in the package documentation, as {@link #toMap()} writes it.
     *
     * @param map the config entries
     * @return the policy
     *     <p>Keys of other owners are ignored, so a model's properties can be read as they are
     *     (DJL's {@code Epoch}, djl-amp's own {@code djl-amp.scaler}); a key that looks like a
     *     misspelt policy key ({@code overide.path.x}) is refused.
     * @throws IllegalArgumentException naming the problem: a missing {@code policy} key, a misspelt
     *     key, an unknown policy name, category or class
     */
    public static PrecisionPolicy fromMap(Map<String, String> map) {
        return PolicyMaps.fromMap(map);
    }

    /**
     * Reads the map form from {@link Properties}, e.g. a {@code .properties} file or {@code
     * Model.getProperties()}: the same keys as {@link #fromMap(Map)}.
     *
     * @param properties the config entries; defaults of the {@code Properties} count too
     * @return the policy
     * @throws IllegalArgumentException as {@link #fromMap(Map)} does
     */
    public static PrecisionPolicy fromProperties(Properties properties) {
        return PolicyMaps.fromProperties(properties);
    }

    /**
     * Returns a builder that starts from {@code base}: its preset and its overrides.
     *
     * @param base the policy to start from
     * @return a new builder
     */
    public static Builder builder(PrecisionPolicy base) {
        return new Builder(base);
    }

    /**
     * Returns the policy's name, e.g. {@code mixed_bfloat16}, without its overrides.
     *
     * @return the name
     */
    public String getName() {
        return preset.policyName();
    }

    /**
     * Returns whether this is the {@code auto} policy, whose compute precision is not known until
     * {@link #resolveAuto(Precision)}.
     *
     * @return true for {@code auto}
     */
    public boolean isAuto() {
        return preset == Preset.AUTO;
    }

    /**
     * Returns the precision {@link CastCategory#LOW} blocks compute in.
     *
     * @return FP16, BF16 or FP32
     * @throws IllegalStateException for the {@code auto} policy, which must be resolved first
     */
    public Precision getComputePrecision() {
        if (isAuto()) {
            throw new IllegalStateException(
                    "The 'auto' precision policy has no compute precision until it is resolved for"
                            + " a device: call resolveAuto(precision) first, or"
                            + " MixedPrecisionBlock.resolvePolicy(device, manager)");
        }
        return preset.computePrecision();
    }

    /**
     * Returns the precision parameters are stored and updated in.
     *
     * @return always FP32
     */
    public Precision getVariablePrecision() {
        return Precision.FP32;
    }

    /**
     * Returns the path overrides, sorted by path.
     *
     * @return an unmodifiable map from block path to category
     */
    public Map<String, CastCategory> getPathOverrides() {
        return overrides.byPath();
    }

    /**
     * Returns the class overrides, sorted by class name.
     *
     * @return an unmodifiable map from block class to category
     */
    public Map<Class<? extends Block>, CastCategory> getClassOverrides() {
        return overrides.byClass();
    }

    /**
     * Returns the concrete policy for a device that recommends {@code recommended}: for {@code
     * auto}, the preset computing in it (BF16: {@code mixed_bfloat16}, FP16: {@code mixed_float16},
     * FP32: {@code float32}) with this policy's overrides; any other policy is returned as it is.
     * With an engine layer's capabilities at hand, pass {@code capabilities.getRecommended()};
     * {@code MixedPrecisionBlock.resolvePolicy(device, manager)} resolves the way training does.
     *
     * @param recommended the precision the device should compute in
     * @return a policy that is not {@code auto}
     */
    public PrecisionPolicy resolveAuto(Precision recommended) {
        Objects.requireNonNull(recommended, "recommended");
        if (!isAuto()) {
            return this;
        }
        return new PrecisionPolicy(Preset.forPrecision(recommended), overrides);
    }

    /**
     * Returns the category of one block: the override for {@code path} if there is one, else the
     * override for the most specific class in the superclass chain of the block's class that has
     * one, else {@link DefaultCastRules#categoryOf(Block)}. Under a policy computing in FP32, LOW
     * resolves to FP32; under {@code auto}, LOW stays LOW.
     *
     * @param block the block
     * @param path its path from the root as {@link BlockPaths} writes it, or null when unknown
     *     (then path overrides do not apply)
     * @return the block's category
     */
    public CastCategory categoryOf(Block block, String path) {
        CastCategory category = overrides.categoryOf(block, path);
        if (category == CastCategory.TRUSTED || category == CastCategory.AUTOCAST) {
            category = CastCategory.LOW;
        }
        if (category == null) {
            category = DefaultCastRules.categoryOf(block);
        }
        if (category == CastCategory.LOW && preset.computePrecision() == Precision.FP32) {
            return CastCategory.FP32;
        }
        return category;
    }

    /**
     * Returns whether the user vouches for a block running in 16 bits: an override gives it {@link
     * CastCategory#TRUSTED}.
     *
     * @param block the block
     * @param path its path, or null when unknown
     * @return true when the override that applies to it is TRUSTED
     */
    public boolean trusts(Block block, String path) {
        return overrides.categoryOf(block, path) == CastCategory.TRUSTED;
    }

    /**
     * Returns whether an override runs a block whole under the engine's autocast: {@link
     * CastCategory#AUTOCAST}.
     *
     * @param block the block
     * @param path its path, or null when unknown
     * @return true when the override that applies to it is AUTOCAST
     */
    public boolean autocasts(Block block, String path) {
        return overrides.categoryOf(block, path) == CastCategory.AUTOCAST;
    }

    /**
     * Returns whether an override of this policy (by path or by class) names the block: its
     * category is the user's choice, not a default.
     *
     * @param block the block
     * @param path its path, or null when unknown
     * @return true when an override applies to it
     */
    public boolean overrides(Block block, String path) {
        return overrides.categoryOf(block, path) != null;
    }

    /**
     * Returns the category of every block djl-amp visits in a tree: the root and, below each {@link
     * CastCategory#CONTAINER}, its children; blocks inside a unit of another category are not
     * visited, since the unit runs as a whole.
     *
     * @param root the root of the model's block tree
     * @return an unmodifiable map from path to category, in depth-first pre-order
     */
    public Map<String, CastCategory> resolveAll(Block root) {
        return ModelPlan.of(this, root, block -> false).getPolicyCategories();
    }

    /**
     * Checks that every override applies to {@code root}'s tree.
     *
     * @param root the root of the model's block tree
     * @throws IllegalArgumentException when a path override names no block in the tree (listing the
     *     existing paths closest to it) or a block inside a unit djl-amp runs as a whole, or when a
     *     class override matches no block in the tree (listing the classes present)
     */
    public void validateAgainst(Block root) {
        ModelPlan.of(this, root, block -> false).validateOverrides();
    }

    /**
     * Returns the map form described in the package documentation.
     *
     * @return a new, ordered map: {@code policy} first, then path and class overrides
     */
    public Map<String, String> toMap() {
        return PolicyMaps.toMap(this);
    }

    /**
     * Returns the string form described in the package documentation; {@link #parse(String)} reads
     * it back to an equal policy.
     *
     * @return e.g. {@code mixed_bfloat16} or {@code mixed_bfloat16[path:01Linear=fp32]}
     */
    @Override
    public String toString() {
        return PolicyFormat.format(this);
    }

    /** {@inheritDoc} */
    @Override
    public boolean equals(Object o) {
        return o instanceof PrecisionPolicy other
                && preset == other.preset
                && overrides.equals(other.overrides);
    }

    /** {@inheritDoc} */
    @Override
    public int hashCode() {
        return Objects.hash(preset, overrides);
    }

    /** Builds a {@link PrecisionPolicy} from a base policy and overrides. */
    public static final class Builder {

        private final Preset preset;
        private final Map<String, CastCategory> pathOverrides;
        private final Map<Class<? extends Block>, CastCategory> classOverrides;

        Builder(PrecisionPolicy base) {
            Objects.requireNonNull(base, "base");
            this.preset = base.preset;
            this.pathOverrides = new TreeMap<>(base.getPathOverrides());
            this.classOverrides = new LinkedHashMap<>(base.getClassOverrides());
        }

        /**
         * Sets the category of every block whose class is {@code blockClass} or a subclass of it,
         * unless a more specific class override or a path override applies. Replaces an earlier
         * override of the same class.
         *
         * @param blockClass a block class (not an interface)
         * @param category LOW, FP32 or PASS_THROUGH
         * @return this builder
         * @throws IllegalArgumentException when {@code blockClass} is an interface or {@code
         *     category} is CONTAINER
         */
        public Builder overrideClass(Class<? extends Block> blockClass, CastCategory category) {
            PolicyOverrides.requireClassOverride(blockClass, category);
            classOverrides.put(blockClass, category);
            return this;
        }

        /**
         * Runs blocks of these classes (and their subclasses) in 16 bits on the user's word that
         * their code is safe on bf16 arrays ({@link CastCategory#TRUSTED}): what {@link
         * LowPrecisionSafe} says for a class its author can change, for classes of someone else's,
         * with the same promise (no softmax, logSoftmax or {@code getDataType()} handed to DJL on a
         * bf16 array) and the same INFO line before each one's first bf16 forward.
         *
         * @param blockClasses block classes
         * @return this builder
         * @throws NullPointerException when the array or one of its classes is null, naming it
         */
        @SafeVarargs
        public final Builder trust(Class<? extends Block>... blockClasses) {
            Objects.requireNonNull(
                    blockClasses,
                    "PrecisionPolicy.Builder.trust needs the block classes to trust, got null:"
                            + " pass them, e.g. trust(Residual.class), or leave trust out");
            for (int i = 0; i < blockClasses.length; i++) {
                if (blockClasses[i] == null) {
                    throw new NullPointerException(
                            "PrecisionPolicy.Builder.trust got null as block class "
                                    + (i + 1)
                                    + " of "
                                    + blockClasses.length
                                    + ": pass only the classes of the blocks to trust, e.g."
                                    + " trust(Residual.class)");
                }
            }
            for (Class<? extends Block> blockClass : blockClasses) {
                overrideClass(blockClass, CastCategory.TRUSTED);
            }
            return this;
        }

        /**
         * Sets the category of the block at {@code path}, ahead of class overrides and defaults.
         * Replaces an earlier override of the same path.
         *
         * @param path a block path as {@link BlockPaths} writes it, {@code ""} for the root
         * @param category LOW, FP32 or PASS_THROUGH
         * @return this builder
         * @throws IllegalArgumentException when {@code category} is CONTAINER
         */
        public Builder overridePath(String path, CastCategory category) {
            PolicyOverrides.requirePathOverride(path, category);
            pathOverrides.put(path, category);
            return this;
        }

        /**
         * Builds the policy.
         *
         * @return a new immutable policy
         */
        public PrecisionPolicy build() {
            return new PrecisionPolicy(preset, new PolicyOverrides(pathOverrides, classOverrides));
        }
    }
}
