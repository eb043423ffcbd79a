package io.github.djlamp.amp.bytecode;

import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.util.Pair;
import io.github.djlamp.amp.bytecode.ForwardCode.UnreadableException;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.objectweb.asm.Type;
import org.objectweb.asm.tree.FieldInsnNode;
import org.objectweb.asm.tree.MethodInsnNode;

/**
 * How a block's code reaches its children, for a {@link SymbolicRun}: a field holding one of them
 * (or null), or a view of some of them, a SequentialBlock of DJL's own class, never registered,
 * whose children the code walks ({@code for (Block b : net.getChildren().values())}, d2l-java's
 * DenseBlock). The walk is followed child by child: its iterator answers {@code hasNext} with what
 * is left.
 */
final class ChildViews {

    /** Some of the block's children, in the order a view lists them. */
    private record View(List<SymbolicRun.Child> children) {}

    private ChildViews() {}

    /** A field of {@code block} its own code reads: one of its children, a view, or null. */
    static Object field(Block block, FieldInsnNode insn, boolean ofTheBlock) {
        if (!ofTheBlock || block == null) {
            throw new UnreadableException("its code reads a field of another object");
        }
        Object value;
        try {
            Class<?> owner =
                    Class.forName(
                            Type.getObjectType(insn.owner).getClassName(),
                            false,
                            block.getClass().getClassLoader());
            Field field = declared(owner, insn.name);
            field.setAccessible(true);
            value = field.get(block);
        } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
            throw new UnreadableException("its field " + insn.name + " cannot be read");
        }
        if (value == null) {
            return SymbolicRun.Special.NULL;
        }
        SymbolicRun.Child child = childOf(block, value);
        if (child != null) {
            return child;
        }
        if (value.getClass() == SequentialBlock.class) {
            List<SymbolicRun.Child> listed = new ArrayList<>();
            for (Block viewed : ((Block) value).getChildren().values()) {
                SymbolicRun.Child own = childOf(block, viewed);
                if (own == null) {
                    break;
                }
                listed.add(own);
            }
            if (listed.size() == ((Block) value).getChildren().size()) {
                return new View(List.copyOf(listed));
            }
        }
        throw new UnreadableException("its field " + insn.name + " holds no child of the block");
    }

    /**
     * The field {@code name} as the JVM resolves it from {@code owner}: javac names the class of
     * the reference ({@code this}), which may inherit the field from a class above it.
     */
    private static Field declared(Class<?> owner, String name) throws NoSuchFieldException {
        for (Class<?> c = owner; c != null; c = c.getSuperclass()) {
            try {
                return c.getDeclaredField(name);
            } catch (NoSuchFieldException e) {
                // declared higher up
            }
        }
        throw new NoSuchFieldException(name);
    }

    private static SymbolicRun.Child childOf(Block block, Object value) {
        for (Pair<String, Block> child : block.getChildren()) {
            if (child.getValue() == value) {
                return new SymbolicRun.Child(child.getValue(), child.getKey());
            }
        }
        return null;
    }

    static boolean isViewCall(MethodInsnNode call) {
        return (call.name.equals("getChildren") && call.desc.equals("()Lai/djl/nn/BlockList;"))
                || (call.owner.equals("ai/djl/nn/BlockList") && call.name.equals("values"))
                || call.name.equals("iterator")
                || (call.owner.equals("java/util/Iterator")
                        && (call.name.equals("hasNext") || call.name.equals("next")));
    }

    static void call(MethodInsnNode call, List<Object> stack) {
        Object receiver = stack.isEmpty() ? null : stack.remove(stack.size() - 1);
        switch (call.name) {
            case "getChildren", "values", "iterator" -> {
                if (!(receiver instanceof View view)) {
                    throw new UnreadableException(
                            "its code lists children of something other than a view of its own");
                }
                stack.add(call.name.equals("iterator") ? view.children().iterator() : view);
            }
            case "hasNext" -> stack.add(new SymbolicRun.Constant(walk(receiver).hasNext() ? 1 : 0));
            default -> {
                Iterator<?> walk = walk(receiver);
                if (!walk.hasNext()) {
                    throw new UnreadableException("its code walks past its children");
                }
                stack.add(walk.next());
            }
        }
    }

    /** A walk over a view's children: the reading's own iterator, never one of the code's. */
    private static Iterator<?> walk(Object receiver) {
        if (receiver instanceof Iterator<?> walk) {
            return walk;
        }
        throw new UnreadableException("its code iterates something other than its children");
    }
}
