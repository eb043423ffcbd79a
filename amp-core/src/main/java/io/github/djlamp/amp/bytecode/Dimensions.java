package io.github.djlamp.amp.bytecode;

import io.github.djlamp.amp.bytecode.ForwardCode.UnreadableException;
import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.tree.AbstractInsnNode;
import org.objectweb.asm.tree.FieldInsnNode;
import org.objectweb.asm.tree.IntInsnNode;
import org.objectweb.asm.tree.LdcInsnNode;
import org.objectweb.asm.tree.MethodInsnNode;

/**
 * The sizes a lambda computes for a reshape, as MobileNetV2's {@code array.reshape(
 * array.getShape().get(0), builder.filters[8], 1, 1)} does: numbers it wrote or captured (a field
 * of a captured object, an element of a captured array), an array's size along an axis, and the
 * {@code long[]} it builds of them for {@code NDArray.reshape(long...)}.
 */
final class Dimensions {

    private static final String NDARRAY = "ai/djl/ndarray/NDArray";
    private static final String SHAPE = "ai/djl/ndarray/types/Shape";

    /** An object a lambda captured, other than a block: its fields and elements are read. */
    record Captured(Object value) {}

    /** What {@code getShape()} of a value returned. */
    record ShapeOf(int value) {}

    /** A {@code long[]} being filled with sizes. */
    private record Sizes(ForwardCode.Dimension[] items) {}

    private Dimensions() {}

    /**
     * Applies one of the instructions SymbolicRun hands here (long constants and conversions, loads
     * from captured arrays, a {@code long[]} made and filled) to the stack.
     */
    static void apply(AbstractInsnNode insn, List<Object> stack) {
        switch (insn.getOpcode()) {
            case Opcodes.LCONST_0, Opcodes.LCONST_1 ->
                    stack.add(new SymbolicRun.Constant(insn.getOpcode() - Opcodes.LCONST_0));
            case Opcodes.LDC -> {
                Object constant = ((LdcInsnNode) insn).cst;
                if (!(constant instanceof Integer || constant instanceof Long)) {
                    throw new UnreadableException("its code loads a constant other than a size");
                }
                stack.add(new SymbolicRun.Constant(((Number) constant).longValue()));
            }
            case Opcodes.I2L, Opcodes.L2I -> {
                if (!(peek(stack) instanceof SymbolicRun.Constant)) {
                    throw new UnreadableException("its code converts something other than a size");
                }
            }
            case Opcodes.IALOAD, Opcodes.LALOAD -> {
                int index = index(pop(stack));
                Object array = pop(stack);
                if (!(array instanceof Captured captured)
                        || !captured.value().getClass().isArray()
                        || index >= Array.getLength(captured.value())) {
                    throw new UnreadableException("its code reads an array it did not capture");
                }
                stack.add(constant(Array.get(captured.value(), index)));
            }
            case Opcodes.NEWARRAY -> {
                int size = index(pop(stack));
                if (((IntInsnNode) insn).operand != Opcodes.T_LONG || size > 16) {
                    throw new UnreadableException("its code makes an array other than long[]");
                }
                stack.add(new Sizes(new ForwardCode.Dimension[size]));
            }
            case Opcodes.LASTORE -> {
                Object value = pop(stack);
                int index = index(pop(stack));
                Object array = pop(stack);
                if (!(array instanceof Sizes sizes) || index >= sizes.items().length) {
                    throw new UnreadableException("its code stores into an array it cannot read");
                }
                sizes.items()[index] = dimension(value);
            }
            default -> throw new IllegalArgumentException("not followed: " + insn.getOpcode());
        }
    }

    /** A field of a captured object: a number as a constant, anything else as captured. */
    static Object fieldOf(Captured owner, FieldInsnNode insn) {
        Object value;
        try {
            Field field = field(owner.value().getClass(), insn.name);
            field.setAccessible(true);
            value = field.get(owner.value());
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new UnreadableException(
                    "its code reads a field " + insn.name + " it cannot read (" + e + ")");
        }
        return value instanceof Number ? constant(value) : new Captured(value);
    }

    /** Whether {@link #call} follows this call. */
    static boolean isSizeCall(MethodInsnNode call) {
        return (NDARRAY.equals(call.owner)
                        && call.name.equals("getShape")
                        && call.desc.equals("()L" + SHAPE + ";"))
                || (SHAPE.equals(call.owner) && call.name.equals("get") && call.desc.equals("(I)J"))
                || (NDARRAY.equals(call.owner)
                        && call.name.equals("reshape")
                        && call.desc.equals("([J)L" + NDARRAY + ";"));
    }

    /** {@code getShape()}, {@code Shape.get(axis)} or {@code reshape(long...)}. */
    static void call(MethodInsnNode call, List<Object> stack, ForwardCode.Operations ops) {
        if (call.name.equals("getShape")) {
            stack.add(new ShapeOf(SymbolicRun.array(pop(stack))));
        } else if (call.name.equals("get")) {
            int axis = index(pop(stack));
            if (!(pop(stack) instanceof ShapeOf shape)) {
                throw new UnreadableException("its code reads a size of a shape it cannot read");
            }
            stack.add(new ForwardCode.Dimension(0, shape.value(), axis));
        } else {
            if (!(pop(stack) instanceof Sizes sizes)) {
                throw new UnreadableException("its code reshapes to sizes it cannot read");
            }
            List<ForwardCode.Dimension> shape = new ArrayList<>();
            for (ForwardCode.Dimension item : sizes.items()) {
                if (item == null) {
                    throw new UnreadableException("its code reshapes with a size left unset");
                }
                shape.add(item);
            }
            int input = SymbolicRun.array(pop(stack));
            stack.add(new SymbolicRun.Value(ops.reshape(input, List.copyOf(shape)), false));
        }
    }

    private static ForwardCode.Dimension dimension(Object value) {
        if (value instanceof SymbolicRun.Constant constant) {
            return new ForwardCode.Dimension(constant.value(), -1, -1);
        }
        if (value instanceof ForwardCode.Dimension dimension) {
            return dimension;
        }
        throw new UnreadableException("its code stores a size it cannot read");
    }

    private static SymbolicRun.Constant constant(Object number) {
        if (!(number instanceof Integer
                || number instanceof Long
                || number instanceof Short
                || number instanceof Byte)) {
            throw new UnreadableException("its code reads a number other than a size");
        }
        return new SymbolicRun.Constant(((Number) number).longValue());
    }

    private static int index(Object value) {
        if (!(value instanceof SymbolicRun.Constant constant)
                || constant.value() < 0
                || constant.value() > Integer.MAX_VALUE) {
            throw new UnreadableException("its code indexes with something other than a constant");
        }
        return (int) constant.value();
    }

    private static Field field(Class<?> type, String name) throws NoSuchFieldException {
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            try {
                return c.getDeclaredField(name);
            } catch (NoSuchFieldException e) {
                // up the superclasses, as the JVM resolves it
            }
        }
        throw new NoSuchFieldException(name);
    }

    private static Object peek(List<Object> stack) {
        if (stack.isEmpty()) {
            throw new UnreadableException("its code pops more than it pushed");
        }
        return stack.get(stack.size() - 1);
    }

    private static Object pop(List<Object> stack) {
        Object value = peek(stack);
        stack.remove(stack.size() - 1);
        return value;
    }
}
