package io.github.djlamp.amp.bytecode;

import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import io.github.djlamp.amp.internal.DjlSeam;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import org.objectweb.asm.Handle;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.Type;
import org.objectweb.asm.tree.MethodNode;

/**
 * What a block's own forward, or a ParallelBlock's join, computes, read from its class file as the
 * operations a compiled graph writes: d2l-java's {@code Residual} forwards its input to the
 * ParallelBlock it holds, whose join adds the branches and applies relu; a residual unit written by
 * hand calls its convolutions and norms through its fields, picks its shortcut by whether a field
 * is null, and adds.
 *
 * <p>The code is run symbolically on the block it belongs to: the fields it reads are read from
 * that block (each must hold one of its children, or null), so a branch on a null field follows the
 * way it goes for this block. What it may do: move values through locals, read elements of lists,
 * make an {@code NDList} of arrays, call its children's {@code forward} with the store, input and
 * training flag it was given, add two arrays, apply relu, sigmoid or tanh, and concatenate the
 * heads of a join's lists as d2l-java's GoogLeNet does ({@link JoinStreams}). Anything else (a
 * loop, another call, a constant array, a second output) stops the reading with what it met.
 */
public final class ForwardCode {

    private static final String NDLIST = "ai/djl/ndarray/NDList";
    private static final String FORWARD_INTERNAL =
            "(Lai/djl/training/ParameterStore;Lai/djl/ndarray/NDList;ZLai/djl/util/PairList;)"
                    + "Lai/djl/ndarray/NDList;";
    private static final String JOIN_BODY = "(Ljava/util/List;)L" + NDLIST + ";";

    /** What the code does, told to the graph being written as the reading meets it. */
    public interface Operations {

        /**
         * A child's forward on one array.
         *
         * @param child the child, one of the block's own
         * @param name the child's name in its parent
         * @param input the value of its input
         * @return the value of its one output
         */
        int forward(Block child, String name, int input);

        /**
         * The sum of two arrays, as DJL's {@code add}.
         *
         * @param a one operand
         * @param b the other
         * @return the sum's value
         */
        int add(int a, int b);

        /**
         * An elementwise function of DJL's {@code Activation}: "relu", "sigmoid" or "tanh".
         *
         * @param function its name
         * @param input the value it applies to
         * @return the result's value
         */
        int pointwise(String function, int input);

        /**
         * Arrays joined along an axis, as DJL's {@code NDArrays.concat}.
         *
         * @param inputs the values, in order
         * @param axis the axis
         * @return the result's value
         */
        int concat(List<Integer> inputs, int axis);

        /**
         * An array reshaped, as DJL's {@code reshape(long...)}.
         *
         * @param input the value reshaped
         * @param shape its new sizes, in order
         * @return the result's value
         */
        int reshape(int input, List<Dimension> shape);
    }

    /**
     * One size of a reshape: a number, or the size of a value along an axis (the batch's, read with
     * {@code getShape().get(0)}).
     *
     * @param size the number, where {@code value} is negative
     * @param value the value whose size it is, or -1
     * @param axis the axis of that value
     */
    public record Dimension(long size, int value, int axis) {}

    /** Why a forward or join could not be read: what the reading met. */
    public static final class UnreadableException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UnreadableException(String reason) {
            super(reason);
        }
    }

    private ForwardCode() {}

    /**
     * Reads the forward of {@code block}, a user's AbstractBlock, on the value {@code input}.
     *
     * @param block the block
     * @param input the value of its one input
     * @param operations where the operations go
     * @return the value of its one output
     * @throws UnreadableException naming what the reading stopped at
     */
    public static int forward(AbstractBlock block, int input, Operations operations) {
        Class<?> declaring = null;
        for (Class<?> c = block.getClass(); c != AbstractBlock.class; c = c.getSuperclass()) {
            for (Method m : c.getDeclaredMethods()) {
                if ("forward".equals(m.getName())) {
                    throw new UnreadableException("it overrides forward");
                }
                if ("forwardInternal".equals(m.getName())
                        && m.getParameterCount() == 4
                        && m.getParameterTypes()[2] != boolean.class) {
                    // a compiled run ignores labels, as DJL's own blocks do
                    throw new UnreadableException("it overrides the forward with labels");
                }
                if (declaring == null
                        && "forwardInternal".equals(m.getName())
                        && !m.isSynthetic()
                        && Type.getMethodDescriptor(m).equals(FORWARD_INTERNAL)) {
                    declaring = c;
                }
            }
        }
        if (declaring == null) {
            throw new UnreadableException("no forwardInternal of its own was found");
        }
        MethodNode method =
                SafeLambdaBodies.methodsOf(declaring).get("forwardInternal" + FORWARD_INTERNAL);
        if (method == null) {
            throw new UnreadableException("its class file cannot be read");
        }
        Object[] locals = new Object[method.maxLocals];
        locals[0] = SymbolicRun.Special.THIS;
        locals[1] = SymbolicRun.Special.STORE;
        locals[2] = new SymbolicRun.Arrays(List.of(input));
        locals[3] = SymbolicRun.Special.TRAINING;
        locals[4] = SymbolicRun.Special.PARAMS;
        return new SymbolicRun(block, operations).result(method, locals);
    }

    /**
     * Reads the function of {@code block}, a lambda of the user's (or a lambda of DJL's that no
     * factory names, MobileNetV2's reshapes), on the value {@code input}: the function itself, or
     * the one {@code LambdaBlock.singleton} wraps, its captured values read from the lambda object.
     *
     * @param block the LambdaBlock
     * @param input the value of its one input
     * @param operations where the operations go
     * @return the value of its one output
     * @throws UnreadableException naming what the reading stopped at
     */
    public static int lambda(LambdaBlock block, int input, Operations operations) {
        Object function;
        try {
            function = DjlSeam.lambdaFunction(block);
        } catch (RuntimeException e) {
            throw new UnreadableException("its function cannot be read (" + e.getMessage() + ")");
        }
        Object wrapped = function == null ? null : KnownLambdas.singletonWrapped(function);
        Object body = wrapped != null ? wrapped : function;
        LambdaSites.Use use =
                wrapped != null ? LambdaSites.Use.SINGLETON : LambdaSites.Use.LAMBDA_BLOCK;
        List<LambdaSites.Site> sites = body == null ? null : LambdaSites.candidates(body, use);
        if (sites != null && sites.size() > 1) {
            sites = LambdaProbe.narrow(body, use, sites);
        }
        if (sites == null || sites.size() != 1) {
            throw new UnreadableException("a lambda that is not one site djl-amp can tell apart");
        }
        LambdaSites.Site site = sites.get(0);
        Class<?> capturing = LambdaSites.capturingClass(body.getClass());
        Handle implementation = site.implementation();
        MethodNode method =
                implementation.getTag() == Opcodes.H_INVOKESTATIC
                                && implementation.getOwner().equals(Type.getInternalName(capturing))
                        ? SafeLambdaBodies.methodsOf(capturing)
                                .get(implementation.getName() + implementation.getDesc())
                        : null;
        List<Object> captured = CapturedValues.read(body);
        if (method == null || captured == null || captured.size() != site.captured().size()) {
            throw new UnreadableException("a lambda whose body cannot be read");
        }
        Object[] locals = new Object[Math.max(method.maxLocals, 2 * captured.size() + 1)];
        int slot = 0;
        for (int i = 0; i < captured.size(); i++) {
            Object value = captured.get(i);
            locals[slot] =
                    value instanceof Number number
                            ? new SymbolicRun.Constant(number.longValue())
                            : new Dimensions.Captured(value);
            slot += Type.getType(site.captured().get(i)).getSize();
        }
        locals[slot] =
                wrapped != null
                        ? new SymbolicRun.Value(input, false)
                        : new SymbolicRun.Arrays(List.of(input));
        return new SymbolicRun(null, operations).result(method, locals);
    }

    /** Whether every candidate's body reads whole, with no captured values. */
    private static boolean readsWhole(
            List<LambdaSites.Site> sites, Object join, List<Integer> branches) {
        Class<?> capturing = LambdaSites.capturingClass(join.getClass());
        for (LambdaSites.Site site : sites) {
            try {
                body(site, capturing, branches, new Counting());
            } catch (UnreadableException e) {
                return false;
            }
        }
        return true;
    }

    /**
     * Reads the join of {@code block}, a lambda without captured values, on its branches' outputs.
     *
     * @param block the ParallelBlock
     * @param branches the value of each branch's one output
     * @param operations where the operations go
     * @return the value of the join's one output
     * @throws UnreadableException naming what the reading stopped at
     */
    public static int join(ParallelBlock block, List<Integer> branches, Operations operations) {
        Object join;
        try {
            join = DjlSeam.parallelJoin(block);
        } catch (RuntimeException e) {
            throw new UnreadableException("its join cannot be read (" + e.getMessage() + ")");
        }
        List<LambdaSites.Site> sites =
                join == null ? null : LambdaSites.candidates(join, LambdaSites.Use.JOIN);
        if (sites != null && sites.size() > 1) {
            // a method reference handed on elsewhere (Activation::relu) takes no list of lists
            sites =
                    sites.stream()
                            .filter(s -> s.implementation().getDesc().equals(JOIN_BODY))
                            .toList();
        }
        if (sites != null && sites.size() > 1 && readsWhole(sites, join, branches)) {
            // bodies that only read lists before their first array call: the probe tells
            sites = LambdaProbe.narrowJoin(join, branches.size(), sites);
        }
        if (sites == null || sites.size() != 1) {
            throw new UnreadableException("a join that is not one lambda without captured values");
        }
        return body(
                sites.get(0), LambdaSites.capturingClass(join.getClass()), branches, operations);
    }

    /** Reads the body of a join's lambda site on the branches' outputs. */
    private static int body(
            LambdaSites.Site site,
            Class<?> capturing,
            List<Integer> branches,
            Operations operations) {
        Handle implementation = site.implementation();
        MethodNode method =
                site.captured().isEmpty()
                                && implementation.getTag() == Opcodes.H_INVOKESTATIC
                                && implementation.getOwner().equals(Type.getInternalName(capturing))
                        ? SafeLambdaBodies.methodsOf(capturing)
                                .get(implementation.getName() + implementation.getDesc())
                        : null;
        if (method == null) {
            throw new UnreadableException("a join whose body cannot be read");
        }
        List<SymbolicRun.Arrays> lists = new ArrayList<>();
        for (int branch : branches) {
            lists.add(new SymbolicRun.Arrays(List.of(branch)));
        }
        Object[] locals = new Object[Math.max(1, method.maxLocals)];
        locals[0] = new SymbolicRun.Lists(lists);
        return new SymbolicRun(null, operations).result(method, locals);
    }

    /** What a reading that writes nothing answers: a new value for each operation. */
    private static final class Counting implements Operations {
        private int values = 1_000_000;

        @Override
        public int forward(Block child, String name, int input) {
            throw new UnreadableException("its join calls a block");
        }

        @Override
        public int add(int a, int b) {
            return values++;
        }

        @Override
        public int pointwise(String function, int input) {
            return values++;
        }

        @Override
        public int concat(List<Integer> inputs, int axis) {
            return values++;
        }

        @Override
        public int reshape(int input, List<Dimension> shape) {
            return values++;
        }
    }
}
