package io.github.djlamp.amp.bytecode;

import ai.djl.nn.Block;
import io.github.djlamp.amp.bytecode.ForwardCode.UnreadableException;
import io.github.djlamp.amp.exception.AmpException;
import java.util.ArrayList;
import java.util.List;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.tree.AbstractInsnNode;
import org.objectweb.asm.tree.FieldInsnNode;
import org.objectweb.asm.tree.InsnList;
import org.objectweb.asm.tree.IntInsnNode;
import org.objectweb.asm.tree.InvokeDynamicInsnNode;
import org.objectweb.asm.tree.JumpInsnNode;
import org.objectweb.asm.tree.MethodInsnNode;
import org.objectweb.asm.tree.MethodNode;
import org.objectweb.asm.tree.TypeInsnNode;
import org.objectweb.asm.tree.VarInsnNode;

/**
 * One symbolic run of a method for {@link ForwardCode}: each instruction applied to values that
 * stand for what the code holds (the block's store and training flag, lists of the graph's values,
 * the block's children), each operation it computes told to the graph as it is met.
 */
final class SymbolicRun {

    private static final String NDLIST = "ai/djl/ndarray/NDList";
    private static final String NDARRAY = "ai/djl/ndarray/NDArray";
    private static final String NDARRAYS = "ai/djl/ndarray/NDArrays";
    private static final String NDARRAY_EX = "ai/djl/ndarray/internal/NDArrayEx";
    private static final String ACTIVATION = "ai/djl/nn/Activation";
    private static final String FORWARD =
            "(Lai/djl/training/ParameterStore;Lai/djl/ndarray/NDList;Z)Lai/djl/ndarray/NDList;";
    private static final List<String> POINTWISE = List.of("relu", "sigmoid", "tanh");

    /** The most instructions one reading follows: a walk over a block's children is short. */
    private static final int MAX_STEPS = 2000;

    /** What the method's parameters and the null constant stand for. */
    enum Special {
        THIS,
        STORE,
        TRAINING,
        PARAMS,
        NULL
    }

    /**
     * An NDList of the graph's values. Its own copy of them, as an NDList is: {@code addAll}
     * appends to it, seen by every reference to the same list.
     */
    record Arrays(List<Integer> values) {
        Arrays {
            values = new ArrayList<>(values);
        }
    }

    /** The join's argument: one NDList per branch. */
    record Lists(List<Arrays> lists) {}

    /** An array a reading made, or the result of getNDArrayInternal. */
    record Value(int value, boolean internal) {}

    record Child(Block block, String name) {}

    /** A number the code wrote or captured. */
    record Constant(long value) {}

    private final Block block;
    private final ForwardCode.Operations operations;
    private final List<Object> stack = new ArrayList<>();

    SymbolicRun(Block block, ForwardCode.Operations operations) {
        this.block = block;
        this.operations = operations;
    }

    int result(MethodNode method, Object[] locals) {
        try {
            return follow(method, locals);
        } catch (UnreadableException | AmpException e) {
            throw e;
        } catch (RuntimeException e) {
            // code the reading met in a shape it does not expect (an index past an array's end)
            throw new UnreadableException("its code could not be followed (" + e + ")");
        }
    }

    private int follow(MethodNode method, Object[] locals) {
        if (!method.tryCatchBlocks.isEmpty()) {
            // a handler is code the reading would not follow, and the probe could make it run
            throw new UnreadableException("its code catches exceptions");
        }
        InsnList code = method.instructions;
        AbstractInsnNode insn = code.getFirst();
        for (int steps = 0; insn != null; steps++) {
            if (steps > MAX_STEPS) {
                throw new UnreadableException("its code runs longer than a walk over its children");
            }
            AbstractInsnNode next = insn.getNext();
            int opcode = insn.getOpcode();
            if (opcode < 0) {
                insn = next;
                continue;
            }
            switch (opcode) {
                case Opcodes.ALOAD, Opcodes.ILOAD -> push(local(locals, insn));
                case Opcodes.ASTORE -> locals[((VarInsnNode) insn).var] = pop();
                case Opcodes.ACONST_NULL -> push(Special.NULL);
                case Opcodes.ICONST_M1,
                                Opcodes.ICONST_0,
                                Opcodes.ICONST_1,
                                Opcodes.ICONST_2,
                                Opcodes.ICONST_3,
                                Opcodes.ICONST_4,
                                Opcodes.ICONST_5 ->
                        push(new Constant(opcode - Opcodes.ICONST_0));
                case Opcodes.BIPUSH, Opcodes.SIPUSH ->
                        push(new Constant(((IntInsnNode) insn).operand));
                case Opcodes.DUP -> push(stack.get(stack.size() - 1));
                case Opcodes.POP -> pop();
                case Opcodes.CHECKCAST -> {}
                case Opcodes.GETFIELD -> {
                    Object owner = pop();
                    push(
                            owner instanceof Dimensions.Captured captured
                                    ? Dimensions.fieldOf(captured, (FieldInsnNode) insn)
                                    : ChildViews.field(
                                            block, (FieldInsnNode) insn, owner == Special.THIS));
                }
                case Opcodes.LCONST_0,
                                Opcodes.LCONST_1,
                                Opcodes.LDC,
                                Opcodes.I2L,
                                Opcodes.L2I,
                                Opcodes.IALOAD,
                                Opcodes.LALOAD,
                                Opcodes.NEWARRAY,
                                Opcodes.LASTORE ->
                        Dimensions.apply(insn, stack);
                case Opcodes.IFNULL, Opcodes.IFNONNULL -> {
                    boolean isNull = pop() == Special.NULL;
                    if (isNull == (opcode == Opcodes.IFNULL)) {
                        next = ((JumpInsnNode) insn).label;
                    }
                }
                case Opcodes.IFEQ, Opcodes.IFNE -> {
                    // only a condition the reading knows: an iterator over a block's children
                    if (!(pop() instanceof Constant condition)) {
                        throw new UnreadableException(
                                "its code branches on something other than whether a field holds"
                                        + " a block or children are left");
                    }
                    if ((condition.value() == 0) == (opcode == Opcodes.IFEQ)) {
                        next = ((JumpInsnNode) insn).label;
                    }
                }
                case Opcodes.GOTO -> next = ((JumpInsnNode) insn).label;
                case Opcodes.NEW -> push(MadeLists.created((TypeInsnNode) insn));
                case Opcodes.ANEWARRAY -> push(MadeLists.buffer((TypeInsnNode) insn, pop()));
                case Opcodes.AASTORE -> MadeLists.store(stack);
                case Opcodes.INVOKEVIRTUAL,
                                Opcodes.INVOKEINTERFACE,
                                Opcodes.INVOKESTATIC,
                                Opcodes.INVOKESPECIAL ->
                        call((MethodInsnNode) insn);
                case Opcodes.INVOKEDYNAMIC ->
                        push(JoinStreams.function((InvokeDynamicInsnNode) insn));
                case Opcodes.ARETURN -> {
                    return output(pop());
                }
                default ->
                        throw new UnreadableException(
                                insn instanceof JumpInsnNode
                                        ? "its code branches on something other than whether"
                                                + " a field holds a block"
                                        : "its code does what djl-amp does not follow"
                                                + " (opcode "
                                                + opcode
                                                + ")");
            }
            insn = next;
        }
        throw new UnreadableException("its code ends without a return");
    }

    private static Object local(Object[] locals, AbstractInsnNode insn) {
        Object value = locals[((VarInsnNode) insn).var];
        if (value == null) {
            throw new UnreadableException("its code reads a local it did not set");
        }
        return value;
    }

    private void push(Object value) {
        stack.add(value);
    }

    private Object pop() {
        return pop(stack);
    }

    static Object pop(List<Object> stack) {
        if (stack.isEmpty()) {
            throw new UnreadableException("its code pops more than it pushed");
        }
        return stack.remove(stack.size() - 1);
    }

    private void call(MethodInsnNode call) {
        String member = call.owner + "." + call.name;
        if (call.getOpcode() == Opcodes.INVOKESPECIAL) {
            MadeLists.construct(call, stack);
        } else if (call.getOpcode() == Opcodes.INVOKESTATIC && JoinStreams.isStatic(call)) {
            JoinStreams.callStatic(call, stack, operations);
        } else if (call.getOpcode() == Opcodes.INVOKESTATIC
                && NDARRAYS.equals(call.owner)
                && call.name.equals("add")
                && call.desc.equals("([L" + NDARRAY + ";)L" + NDARRAY + ";")) {
            push(new Value(addTwo(pop()), false));
        } else if (call.getOpcode() == Opcodes.INVOKESTATIC) {
            if (!ACTIVATION.equals(call.owner)
                    || !POINTWISE.contains(call.name)
                    || !call.desc.equals("(L" + NDARRAY + ";)L" + NDARRAY + ";")) {
                throw new UnreadableException("its code calls " + javaName(member));
            }
            push(new Value(operations.pointwise(call.name, array(pop())), false));
        } else if (Dimensions.isSizeCall(call)) {
            Dimensions.call(call, stack, operations);
        } else if (ChildViews.isViewCall(call)) {
            ChildViews.call(call, stack);
        } else if (JoinStreams.isStreamCall(call)) {
            JoinStreams.call(call, stack);
        } else if (call.name.equals("forward")) {
            childForward(call);
        } else if (NDARRAY.equals(call.owner)
                && call.name.equals("add")
                && call.desc.equals("(L" + NDARRAY + ";)L" + NDARRAY + ";")) {
            int b = array(pop());
            int a = array(pop());
            push(new Value(operations.add(a, b), false));
        } else if (NDARRAY.equals(call.owner) && call.name.equals("getNDArrayInternal")) {
            push(new Value(array(pop()), true));
        } else if (NDARRAY_EX.equals(call.owner)
                && POINTWISE.contains(call.name)
                && call.desc.equals("()L" + NDARRAY + ";")
                && stack.get(stack.size() - 1) instanceof Value v
                && v.internal()) {
            pop();
            push(new Value(operations.pointwise(call.name, v.value()), false));
        } else if (NDLIST.equals(call.owner)
                && call.name.equals("addAll")
                && call.desc.equals("(L" + NDLIST + ";)L" + NDLIST + ";")) {
            // SqueezeNet's fire join: the first branch's list, the second's appended, returned
            List<Integer> appended = list(pop()).values();
            Object receiver = pop();
            list(receiver).values().addAll(appended);
            push(receiver);
        } else if (call.name.equals("get") && call.desc.equals("(I)Ljava/lang/Object;")) {
            Object index = pop();
            push(element(pop(), index));
        } else if (NDLIST.equals(call.owner)
                && (call.name.equals("head") || call.name.equals("singletonOrThrow"))) {
            Object list = pop();
            Object resolved = MadeLists.resolved(list);
            if (!(resolved instanceof Arrays arrays)
                    || (call.name.equals("singletonOrThrow") && arrays.values().size() != 1)) {
                throw new UnreadableException(
                        "its code calls " + javaName(member) + " on a list it cannot read");
            }
            push(new Value(arrays.values().get(0), false));
        } else {
            throw new UnreadableException("its code calls " + javaName(member));
        }
    }

    /**
     * {@code NDArrays.add(a, b)}, which DJL computes as {@code a.add(b)} for two arrays
     * (MobileNetV2's residual join); more are stacked and summed, another computation.
     */
    private int addTwo(Object arrays) {
        if (!(arrays instanceof MadeLists.ArrayBuffer buffer)
                || buffer.items().length != 2
                || buffer.items()[0] == null
                || buffer.items()[1] == null) {
            throw new UnreadableException(
                    "its code calls ai.djl.ndarray.NDArrays.add on other than two arrays");
        }
        return operations.add(buffer.items()[0], buffer.items()[1]);
    }

    /** A child's {@code forward(store, inputs, training)}, with no labels or parameters. */
    private void childForward(MethodInsnNode call) {
        if (!call.desc.equals(FORWARD)) {
            throw new UnreadableException("its code calls a forward with labels or parameters");
        }
        Object training = pop();
        Object inputs = pop();
        Object store = pop();
        Object receiver = pop();
        if (!(receiver instanceof Child child)
                || store != Special.STORE
                || training != Special.TRAINING) {
            throw new UnreadableException(
                    "its code calls a forward other than a child's with its own store and"
                            + " training flag");
        }
        push(
                new Arrays(
                        List.of(
                                operations.forward(
                                        child.block(), child.name(), array(list(inputs))))));
    }

    private static Object element(Object value, Object index) {
        Object list = MadeLists.resolved(value);
        if (!(index instanceof Constant i)) {
            throw new UnreadableException("its code reads a list at an index it computes");
        }
        if (list instanceof Lists lists && i.value() < lists.lists().size()) {
            return lists.lists().get((int) i.value());
        }
        if (list instanceof Arrays arrays && i.value() < arrays.values().size()) {
            return new Value(arrays.values().get((int) i.value()), false);
        }
        throw new UnreadableException("its code reads a list it cannot read");
    }

    static Arrays list(Object value) {
        Object resolved = MadeLists.resolved(value);
        if (resolved instanceof Arrays arrays) {
            return arrays;
        }
        throw new UnreadableException("its code passes on something other than an NDList");
    }

    /** The one array of an NDList, or the array itself. */
    static int array(Object value) {
        if (value instanceof Value v && !v.internal()) {
            return v.value();
        }
        if (value instanceof Arrays || value instanceof MadeLists.Uninitialized) {
            List<Integer> values = list(value).values();
            if (values.size() == 1) {
                return values.get(0);
            }
        }
        throw new UnreadableException("its code computes on something other than one array");
    }

    private static int output(Object value) {
        if (value instanceof Value v && !v.internal()) {
            return v.value(); // a singleton function's array
        }
        List<Integer> values = list(value).values();
        if (values.size() != 1) {
            throw new UnreadableException("it returns " + values.size() + " arrays");
        }
        return values.get(0);
    }

    static String javaName(String member) {
        return member.replace('/', '.');
    }
}
