package io.github.djlamp.amp.internal;

import ai.djl.nn.Block;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;

/**
 * Copies of a block whose fields hold something else in place of some of its children, so that the
 * block's own forward runs over those: a shadow that computes in its own precision, or a stand-in a
 * kernel check needs. The copy is an instance of the block's class made without running a
 * constructor, each instance field holding what the block's holds, or its replacement. Not part of
 * djl-amp's API.
 */
public final class BlockCopies {

    /** {@code Unsafe.allocateInstance}: an instance of a class, no constructor run. */
    private static final MethodHandle ALLOCATE = allocator();

    private BlockCopies() {}

    /**
     * Returns every instance field of the block's class and the classes above it, made accessible.
     *
     * @param block the block
     * @return its instance fields
     * @throws RuntimeException where a field cannot be made accessible (a package its module does
     *     not open)
     */
    public static List<Field> instanceFields(Block block) {
        List<Field> fields = new ArrayList<>();
        for (Class<?> c = block.getClass(); c != Object.class; c = c.getSuperclass()) {
            for (Field field : c.getDeclaredFields()) {
                if (!Modifier.isStatic(field.getModifiers())) {
                    field.setAccessible(true);
                    fields.add(field);
                }
            }
        }
        return fields;
    }

    /**
     * Returns a copy of {@code block} whose fields hold what {@code replace} returns for what the
     * block's fields hold (the value itself where nothing replaces it).
     *
     * @param block the block
     * @param fields its instance fields ({@link #instanceFields})
     * @param replace the replacement of a field's value
     * @return the copy
     * @throws ReflectiveOperationException where the class cannot be instantiated so
     */
    public static Block copy(Block block, List<Field> fields, UnaryOperator<Object> replace)
            throws ReflectiveOperationException {
        Object copy;
        try {
            copy = ALLOCATE.invoke(block.getClass());
        } catch (Error | RuntimeException e) {
            throw e;
        } catch (Throwable e) {
            throw new InstantiationException(e.toString());
        }
        for (Field field : fields) {
            field.set(copy, replace.apply(field.get(block)));
        }
        return (Block) copy;
    }

    private static MethodHandle allocator() {
        try {
            // by reflection: javac has no switch to silence its warning on sun.misc.Unsafe
            Class<?> unsafeClass = Class.forName("sun.misc.Unsafe");
            Field field = unsafeClass.getDeclaredField("theUnsafe");
            field.setAccessible(true);
            return MethodHandles.lookup()
                    .findVirtual(
                            unsafeClass,
                            "allocateInstance",
                            MethodType.methodType(Object.class, Class.class))
                    .bindTo(field.get(null));
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new ExceptionInInitializerError(e);
        }
    }
}
