package io.github.djlamp.amp.bytecode;

import io.github.djlamp.amp.bytecode.ForwardCode.UnreadableException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.objectweb.asm.Handle;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.tree.InvokeDynamicInsnNode;
import org.objectweb.asm.tree.MethodInsnNode;

/**
 * The few stream members and DJL statics a join uses to concatenate its branches, as d2l-java's
 * GoogLeNet writes its Inception join: {@code list.stream().map(NDList::head)
 * .collect(Collectors.toList())}, then {@code NDArrays.concat(new NDList(heads), 1)}. A {@link
 * SymbolicRun} hands them here; each is applied to the symbolic values it stands for.
 */
final class JoinStreams {

    private static final String STREAM = "java/util/stream/Stream";
    private static final String NDLIST = "ai/djl/ndarray/NDList";
    private static final String NDARRAYS = "ai/djl/ndarray/NDArrays";
    private static final String LAMBDA_METAFACTORY = "java/lang/invoke/LambdaMetafactory";
    private static final Set<String> HEADS = Set.of("head", "singletonOrThrow");

    /** A stream of the join's lists, or of arrays. */
    private record Stream(List<Object> items) {}

    /** {@code NDList::head} or {@code NDList::singletonOrThrow}. */
    private record HeadOf() {}

    /** {@code Collectors.toList()}. */
    private record ToList() {}

    private JoinStreams() {}

    static boolean isStatic(MethodInsnNode call) {
        return (NDARRAYS.equals(call.owner) && call.name.equals("concat"))
                || ("java/util/stream/Collectors".equals(call.owner) && call.name.equals("toList"));
    }

    static void callStatic(MethodInsnNode call, List<Object> stack, ForwardCode.Operations ops) {
        if (call.name.equals("toList")) {
            stack.add(new ToList());
            return;
        }
        int axis = 0;
        if (call.desc.equals("(L" + NDLIST + ";I)Lai/djl/ndarray/NDArray;")) {
            if (!(pop(stack) instanceof SymbolicRun.Constant constant)) {
                throw new UnreadableException("its code concatenates along an axis it computes");
            }
            axis = (int) constant.value();
        } else if (!call.desc.equals("(L" + NDLIST + ";)Lai/djl/ndarray/NDArray;")) {
            throw new UnreadableException("its code calls ai.djl.ndarray.NDArrays.concat");
        }
        List<Integer> arrays = SymbolicRun.list(pop(stack)).values();
        stack.add(new SymbolicRun.Value(ops.concat(arrays, axis), false));
    }

    static boolean isStreamCall(MethodInsnNode call) {
        return (call.owner.equals("java/util/List") && call.name.equals("stream"))
                || (call.owner.equals(STREAM)
                        && (call.name.equals("map") || call.name.equals("collect")));
    }

    static void call(MethodInsnNode call, List<Object> stack) {
        if (call.name.equals("stream")) {
            if (!(pop(stack) instanceof SymbolicRun.Lists lists)) {
                throw new UnreadableException("its code streams a list it cannot read");
            }
            stack.add(new Stream(new ArrayList<>(lists.lists())));
        } else if (call.name.equals("map")) {
            Object function = pop(stack);
            if (!(function instanceof HeadOf) || !(pop(stack) instanceof Stream stream)) {
                throw new UnreadableException(
                        "its code maps a stream by a function it cannot read");
            }
            List<Object> heads = new ArrayList<>();
            for (Object item : stream.items()) {
                List<Integer> values = SymbolicRun.list(item).values();
                heads.add(values.get(0));
            }
            stack.add(new Stream(heads));
        } else {
            Object collector = pop(stack);
            if (!(collector instanceof ToList) || !(pop(stack) instanceof Stream stream)) {
                throw new UnreadableException("its code collects a stream other than to a list");
            }
            List<Integer> arrays = new ArrayList<>();
            for (Object item : stream.items()) {
                if (!(item instanceof Integer value)) {
                    throw new UnreadableException("its code collects lists, not arrays");
                }
                arrays.add(value);
            }
            stack.add(new SymbolicRun.Arrays(List.copyOf(arrays)));
        }
    }

    /** {@code NDList::head} made by an invokedynamic without captured values. */
    static Object function(InvokeDynamicInsnNode indy) {
        if (indy.bsm.getOwner().equals(LAMBDA_METAFACTORY)
                && indy.desc.startsWith("()")
                && indy.bsmArgs.length > 1
                && indy.bsmArgs[1] instanceof Handle handle
                && handle.getTag() == Opcodes.H_INVOKEVIRTUAL
                && handle.getOwner().equals(NDLIST)
                && HEADS.contains(handle.getName())) {
            return new HeadOf();
        }
        throw new UnreadableException("its code makes a function other than NDList::head");
    }

    private static Object pop(List<Object> stack) {
        if (stack.isEmpty()) {
            throw new UnreadableException("its code pops more than it pushed");
        }
        return stack.remove(stack.size() - 1);
    }
}
