package io.github.djlamp.amp.bytecode;

import io.github.djlamp.amp.bytecode.ForwardCode.UnreadableException;
import java.util.ArrayList;
import java.util.List;
import org.objectweb.asm.tree.MethodInsnNode;
import org.objectweb.asm.tree.TypeInsnNode;

/**
 * The lists a reading's code makes: {@code new NDList(...)} of an {@code NDArray[]} it filled or of
 * a collection of arrays, for {@link SymbolicRun}.
 */
final class MadeLists {

    private static final String NDLIST = "ai/djl/ndarray/NDList";
    private static final String NDARRAY = "ai/djl/ndarray/NDArray";

    /** A {@code new NDArray[n]} being filled. */
    record ArrayBuffer(Integer[] items) {}

    /** A {@code new NDList} before its constructor; the constructor fills it. */
    static final class Uninitialized {
        SymbolicRun.Arrays made;
    }

    private MadeLists() {}

    /** The list a {@code new NDList} became once constructed, or {@code value} itself. */
    static Object resolved(Object value) {
        return value instanceof Uninitialized made ? made.made : value;
    }

    /** {@code new NDList}, before its constructor. */
    static Object created(TypeInsnNode insn) {
        if (!NDLIST.equals(insn.desc)) {
            throw new UnreadableException("its code makes a " + insn.desc.replace('/', '.'));
        }
        return new Uninitialized();
    }

    /** {@code new NDArray[size]}. */
    static Object buffer(TypeInsnNode insn, Object size) {
        if (!NDARRAY.equals(insn.desc)
                || !(size instanceof SymbolicRun.Constant n)
                || n.value() > 16) {
            throw new UnreadableException("its code makes an array other than NDArray[]");
        }
        return new ArrayBuffer(new Integer[(int) n.value()]);
    }

    /** An array stored into an {@code NDArray[]}. */
    static void store(List<Object> stack) {
        Object value = SymbolicRun.pop(stack);
        Object index = SymbolicRun.pop(stack);
        Object array = SymbolicRun.pop(stack);
        if (!(array instanceof ArrayBuffer buffer)
                || !(index instanceof SymbolicRun.Constant i)
                || !(value instanceof SymbolicRun.Value v)
                || v.internal()) {
            throw new UnreadableException("its code stores into an array other than NDArray[]");
        }
        buffer.items()[(int) i.value()] = v.value();
    }

    /** {@code new NDList(arrays...)} or {@code new NDList(collection)}. */
    static void construct(MethodInsnNode call, List<Object> stack) {
        boolean ofCollection = call.desc.equals("(Ljava/util/Collection;)V");
        if (!NDLIST.equals(call.owner)
                || !call.name.equals("<init>")
                || !(ofCollection || call.desc.equals("([L" + NDARRAY + ";)V"))) {
            throw new UnreadableException(
                    "its code calls " + SymbolicRun.javaName(call.owner + "." + call.name));
        }
        Object items = SymbolicRun.pop(stack);
        Object target = SymbolicRun.pop(stack);
        if (ofCollection
                && items instanceof SymbolicRun.Arrays arrays
                && target instanceof Uninitialized made) {
            made.made = new SymbolicRun.Arrays(arrays.values()); // NDList(Collection) copies
            return;
        }
        if (!(items instanceof ArrayBuffer buffer) || !(target instanceof Uninitialized made)) {
            throw new UnreadableException("its code makes an NDList it cannot read");
        }
        List<Integer> values = new ArrayList<>();
        for (Integer item : buffer.items()) {
            if (item == null) {
                throw new UnreadableException("its code makes an NDList with an unset array");
            }
            values.add(item);
        }
        made.made = new SymbolicRun.Arrays(List.copyOf(values));
    }
}
