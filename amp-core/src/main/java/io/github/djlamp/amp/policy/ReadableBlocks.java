package io.github.djlamp.amp.policy;

import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.util.Pair;
import io.github.djlamp.amp.bytecode.KnownLambdas;
import io.github.djlamp.amp.bytecode.SafeLambdaBodies;
import java.lang.reflect.Field;
import java.lang.reflect.InaccessibleObjectException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import org.objectweb.asm.Type;

/**
 * The blocks with children whose forward djl-amp can read as safe on bf16 arrays, so that they
 * compute in 16 bits without anyone vouching for them: d2l-java's {@code Residual} forwards its
 * input to the {@code ParallelBlock} it holds and nothing else, and computed 0.1% of its arithmetic
 * in bf16 unless the user trusted its class; DJL's YOLOv3 (model zoo) calls its backbone and heads,
 * picks and concatenates their outputs, and computed none.
 *
 * <p>Its class, a user's or DJL's own, extends {@link AbstractBlock}; no class between overrides
 * {@code forward} or the forward with labels; the {@code forwardInternal} it runs reads as {@link
 * SafeLambdaBodies} reads a lambda, where it may also call {@code forward} on the blocks its fields
 * hold, and every field that holds a block holds one of its registered children, or a view of them:
 * a SequentialBlock of DJL's own class, never registered, listing some of them, whose children the
 * code may iterate ({@code view.getChildren().values()}) and forward (d2l-java's {@code
 * DenseBlock}). What the children run is then the rules' to judge ({@link DefaultCastRules}): with
 * every child safe in 16 bits the block is one 16-bit unit; around engine code, the engine's own
 * autocast runs it whole; otherwise its own code runs over its children, each in its own precision.
 */
final class ReadableBlocks {

    private static final String FORWARD_INTERNAL =
            "(Lai/djl/training/ParameterStore;Lai/djl/ndarray/NDList;ZLai/djl/util/PairList;)"
                    + "Lai/djl/ndarray/NDList;";

    private ReadableBlocks() {}

    /**
     * Returns whether {@code block}'s own forward is code djl-amp reads as safe on bf16 arrays.
     *
     * @param block a block
     * @return true for a readable block with children
     */
    static boolean isReadable(Block block) {
        return whyNot(block) == null;
    }

    /**
     * Returns whether {@code block} is readable and reaches its children through its own fields
     * only, never through a view ({@link #whyNot}): its code can then run on a copy whose fields
     * hold the children's shadows ({@link DefaultCastRules#isReadOverChildren}).
     *
     * @param block a block
     * @return true for a readable block without views
     */
    static boolean isReadableWithoutViews(Block block) {
        Set<String> views = new HashSet<>();
        return whyNot(block, views) == null && views.isEmpty();
    }

    /**
     * Returns why djl-amp does not read {@code block}'s forward as safe, for the fallback WARN:
     * "its forward calls ai.djl.ndarray.NDArray.softmax"; null when it does.
     *
     * @param block a block
     * @return the reason, or null for a readable block
     */
    static String whyNot(Block block) {
        return whyNot(block, new HashSet<>());
    }

    /** {@link #whyNot(Block)}, adding to {@code viewFields} the fields that hold a view. */
    private static String whyNot(Block block, Set<String> viewFields) {
        if (!(block instanceof AbstractBlock) || block.getChildren().isEmpty()) {
            return "it is not an AbstractBlock with children";
        }
        Class<?> declaring = null;
        Set<String> childFields = new HashSet<>();
        Set<Block> children = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Pair<String, Block> child : block.getChildren()) {
            children.add(child.getValue());
        }
        for (Class<?> c = block.getClass(); c != AbstractBlock.class; c = c.getSuperclass()) {
            if (c == null) {
                return "it extends no AbstractBlock";
            }
            for (Method m : c.getDeclaredMethods()) {
                if ("forward".equals(m.getName())) {
                    return "it overrides forward";
                }
                if ("forwardInternal".equals(m.getName())
                        && !m.isSynthetic()
                        && m.getParameterCount() == 4) {
                    if (m.getParameterTypes()[2] != boolean.class) {
                        return "it overrides the forward with labels";
                    }
                    if (declaring == null) {
                        declaring = c;
                    }
                }
            }
            String stray = strayBlockField(block, c, children, childFields, viewFields);
            if (stray != null) {
                return stray;
            }
        }
        if (declaring == null) {
            return "no forwardInternal of its own was found";
        }
        try {
            SafeLambdaBodies.Reading reading =
                    new SafeLambdaBodies.Reading(
                            declaring,
                            KnownLambdas::isBf16Function,
                            Set.copyOf(childFields),
                            Set.copyOf(viewFields));
            return reading.safeMethod("forwardInternal", FORWARD_INTERNAL)
                    ? null
                    : "its forward " + reading.stoppedAt();
        } catch (RuntimeException | LinkageError e) {
            return "its class file could not be read (" + e + ")";
        }
    }

    /**
     * Adds the fields of {@code c} that hold a block to {@code childFields}, and those that hold a
     * view of the block's children to {@code viewFields}; returns why not when one holds any other
     * block or cannot be read, else null.
     */
    private static String strayBlockField(
            Block block,
            Class<?> c,
            Set<Block> children,
            Set<String> childFields,
            Set<String> viewFields) {
        for (Field f : c.getDeclaredFields()) {
            if (Modifier.isStatic(f.getModifiers()) || f.getType().isPrimitive()) {
                continue;
            }
            Object value;
            try {
                f.setAccessible(true);
                value = f.get(block);
            } catch (InaccessibleObjectException e) {
                return notOpen(c);
            } catch (ReflectiveOperationException | RuntimeException e) {
                return "its field " + f.getName() + " cannot be read (" + e + ")";
            }
            boolean finalNull =
                    value == null
                            && Modifier.isFinal(f.getModifiers())
                            && Block.class.isAssignableFrom(f.getType());
            if (value instanceof Block || finalNull) {
                String name = Type.getInternalName(c) + "." + f.getName();
                // a final field left null (d2l's optional 1x1 projection) reaches no block
                if (value != null && !children.contains(value)) {
                    if (!isViewOf(value, children)) {
                        return "its field "
                                + f.getName()
                                + " holds a block that is not one of its children";
                    }
                    viewFields.add(name);
                    continue;
                }
                childFields.add(name);
            }
        }
        return null;
    }

    /**
     * Why a block of a named module's package that is not open to djl-amp cannot be read: its
     * fields, which say what its forward reaches, are closed to reflection.
     */
    private static String notOpen(Class<?> c) {
        String pkg = c.getPackageName();
        String module = c.getModule().getName();
        return "its package "
                + pkg
                + " is not open to djl-amp: add 'opens "
                + pkg
                + " to "
                + ReadableBlocks.class.getModule().getName()
                + ";' to module "
                + module
                + "'s module-info.java";
    }

    /**
     * Whether {@code value} is a view of the block's children: a SequentialBlock of exactly DJL's
     * class, never registered, that lists some of them (d2l-java's {@code DenseBlock} adds each of
     * its children to such a block and iterates it in its forward).
     */
    private static boolean isViewOf(Object value, Set<Block> children) {
        if (value.getClass() != SequentialBlock.class) {
            return false;
        }
        List<Block> listed = ((Block) value).getChildren().values();
        return !listed.isEmpty() && children.containsAll(listed);
    }
}
