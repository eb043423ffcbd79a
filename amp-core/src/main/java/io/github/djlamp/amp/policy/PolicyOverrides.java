package io.github.djlamp.amp.policy;

import ai.djl.nn.Block;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * The overrides of a {@link PrecisionPolicy}: categories by block path and by block class, and
 * which of them applies to a block. Immutable; path overrides sorted by path, class overrides by
 * class name, so that equal overrides print and compare equal.
 */
final class PolicyOverrides {

    static final PolicyOverrides NONE = new PolicyOverrides(Map.of(), Map.of());

    private final Map<String, CastCategory> byPath;
    private final Map<Class<? extends Block>, CastCategory> byClass;

    PolicyOverrides(
            Map<String, CastCategory> byPath, Map<Class<? extends Block>, CastCategory> byClass) {
        this.byPath = Collections.unmodifiableMap(new TreeMap<>(byPath));
        Map<Class<? extends Block>, CastCategory> sorted = new LinkedHashMap<>();
        byClass.entrySet().stream()
                .sorted(Comparator.comparing(e -> e.getKey().getName()))
                .forEach(e -> sorted.put(e.getKey(), e.getValue()));
        this.byClass = Collections.unmodifiableMap(sorted);
    }

    Map<String, CastCategory> byPath() {
        return byPath;
    }

    Map<Class<? extends Block>, CastCategory> byClass() {
        return byClass;
    }

    /** The path override, else the most specific class override, else null. */
    CastCategory categoryOf(Block block, String path) {
        Objects.requireNonNull(block, "block");
        CastCategory category = path == null ? null : byPath.get(path);
        for (Class<?> c = block.getClass(); category == null && c != null; c = c.getSuperclass()) {
            category = byClass.get(c);
        }
        return category;
    }

    /**
     * Checks that {@code blockClass} can carry a class override of {@code category}.
     *
     * @throws IllegalArgumentException for an interface, a class that is not a block, or CONTAINER
     */
    static void requireClassOverride(Class<? extends Block> blockClass, CastCategory category) {
        Objects.requireNonNull(blockClass, "blockClass");
        requireOverridable(category, "class " + blockClass.getName());
        if (blockClass.isInterface() || !Block.class.isAssignableFrom(blockClass)) {
            throw new IllegalArgumentException(
                    "Cannot override "
                            + blockClass.getName()
                            + ": class overrides need a class implementing ai.djl.nn.Block"
                            + (blockClass.isInterface() ? ", not an interface" : ""));
        }
    }

    /**
     * Checks that a path override of {@code category} can be set.
     *
     * @throws IllegalArgumentException for CONTAINER
     */
    static void requirePathOverride(String path, CastCategory category) {
        Objects.requireNonNull(path, "path");
        requireOverridable(category, "path '" + path + "'");
    }

    private static void requireOverridable(CastCategory category, String target) {
        Objects.requireNonNull(category, "category");
        if (!category.isOverridable()) {
            throw new IllegalArgumentException(
                    "Cannot override "
                            + target
                            + " to CONTAINER: djl-amp assigns it to SequentialBlock and"
                            + " ParallelBlock only; valid override categories are "
                            + CastCategory.validNames());
        }
    }

    /** {@inheritDoc} */
    @Override
    public boolean equals(Object o) {
        return o instanceof PolicyOverrides other
                && byPath.equals(other.byPath)
                && byClass.equals(other.byClass);
    }

    /** {@inheritDoc} */
    @Override
    public int hashCode() {
        return Objects.hash(byPath, byClass);
    }
}
