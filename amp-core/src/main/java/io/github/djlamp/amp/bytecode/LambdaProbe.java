package io.github.djlamp.amp.bytecode;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import io.github.djlamp.amp.bytecode.LambdaSites.Site;
import io.github.djlamp.amp.bytecode.LambdaSites.Use;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import org.objectweb.asm.Handle;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.Type;
import org.objectweb.asm.tree.AbstractInsnNode;
import org.objectweb.asm.tree.FieldInsnNode;
import org.objectweb.asm.tree.IntInsnNode;
import org.objectweb.asm.tree.LdcInsnNode;
import org.objectweb.asm.tree.MethodInsnNode;
import org.objectweb.asm.tree.MethodNode;
import org.objectweb.asm.tree.TypeInsnNode;

/**
 * Tells which of a class's lambda sites made a function object when the class file alone cannot:
 * DJL's {@code TransferFreshFruit} hands {@code addSingleton} both {@code nd -> nd.squeeze(...)}
 * and {@code nd -> nd.softmax(1)}, two lambdas JDK 17 gives no way to tell apart, so both stayed
 * fp32. The function is applied to a probe array whose every method stops the call at once; the
 * method on the stack right above the caller is the site's implementation.
 *
 * <p>The probe runs only what every candidate may run before it touches its argument, read from its
 * class file: local variables, constants, DJL's data types, arithmetic, arrays it makes itself, new
 * lists and {@code NDList}'s reads, and then a call of an {@code NDArray} method, which the probe
 * answers by stopping. A candidate is never run, and all candidates stay, as without the probe,
 * when it may do anything else first (write a field, call other code, branch, catch, take a lock),
 * when it captures an array or a list of them (its first call could be on one), or when its method
 * is in a class other than the one that wrote the lambda or DJL's (calling it could run that
 * class's static initializer).
 */
public final class LambdaProbe {

    private static final String NDARRAY = Type.getInternalName(NDArray.class);
    private static final String NDLIST = Type.getInternalName(NDList.class);

    /** NDList's members that only read the list, "name(descriptor)". */
    private static final Set<String> LIST_READS =
            Set.of(
                    "head()Lai/djl/ndarray/NDArray;",
                    "singletonOrThrow()Lai/djl/ndarray/NDArray;",
                    "get(I)Ljava/lang/Object;",
                    "size()I",
                    "isEmpty()Z",
                    "<init>()V",
                    "<init>(I)V",
                    "<init>([Lai/djl/ndarray/NDArray;)V");

    /** DJL's data types: enum constants, read with no code of the caller's run. */
    private static final String DATA_TYPE = Type.getInternalName(DataType.class);

    private LambdaProbe() {}

    /**
     * Returns the candidates that made {@code function}: the one whose implementation the probe
     * meets, or all of them when the probe cannot run or meets none.
     *
     * @param function a function of a LambdaBlock or one {@code LambdaBlock.singleton} wraps
     * @param destination where it was found: {@link Use#LAMBDA_BLOCK} or {@link Use#SINGLETON}
     * @param candidates the sites that may have made it
     * @return the sites that made it
     */
    static List<Site> narrow(Object function, Use destination, List<Site> candidates) {
        if (candidates.size() < 2
                || !(function instanceof Function)
                || (destination != Use.LAMBDA_BLOCK && destination != Use.SINGLETON)) {
            return candidates;
        }
        Class<?> capturing = LambdaSites.capturingClass(function.getClass());
        if (capturing == null) {
            return candidates;
        }
        String capturingName = Type.getInternalName(capturing);
        ClassLoader loader = function.getClass().getClassLoader();
        for (Site site : candidates) {
            if (capturesArrays(site)) {
                return candidates; // its first NDArray call could be on a real array of its own
            }
            String owner = site.implementation().getOwner();
            // calling a method of a class not yet initialized would run its static initializer:
            // the capturing class ran the code that made the lambda, DJL's initializers are its own
            if (!(owner.equals(capturingName) || owner.startsWith("ai/djl/"))
                    || !stopsBeforeAnythingElse(site.implementation(), loader)) {
                return candidates;
            }
        }
        String[] implementation = run(function, destination);
        if (implementation == null) {
            return candidates;
        }
        return madeBy(implementation, candidates);
    }

    /**
     * Returns the candidates that made the join {@code function} of a ParallelBlock of {@code
     * branches} branches: the one whose implementation the probe meets. Only for candidates whose
     * bodies {@link ForwardCode} reads whole, which do nothing but read lists and make lists before
     * their first call on an array.
     *
     * @param function the join
     * @param branches how many lists it is applied to
     * @param candidates the sites that may have made it, each read whole
     * @return the sites that made it, or all of them when the probe meets none
     */
    static List<Site> narrowJoin(Object function, int branches, List<Site> candidates) {
        String[] implementation = run(function, Use.JOIN, branches);
        if (implementation == null) {
            return candidates;
        }
        return madeBy(implementation, candidates);
    }

    /** The candidates whose implementation is the one met, or all where none is. */
    private static List<Site> madeBy(String[] implementation, List<Site> candidates) {
        List<Site> made = new ArrayList<>();
        for (Site site : candidates) {
            Handle handle = site.implementation();
            if (handle.getOwner().equals(implementation[0])
                    && handle.getName().equals(implementation[1])
                    && handle.getDesc().equals(implementation[2])) {
                made.add(site);
            }
        }
        return made.isEmpty() ? candidates : made;
    }

    /** Whether a site captures an array or a list of them: values the probe cannot stand for. */
    private static boolean capturesArrays(Site site) {
        for (String captured : site.captured()) {
            String element = captured.replace("[", "");
            if (element.equals("L" + NDARRAY + ";") || element.equals("L" + NDLIST + ";")) {
                return true;
            }
        }
        return false;
    }

    /** Owner, name and descriptor of the method that called the probe from {@code function}. */
    @SuppressWarnings("unchecked")
    private static String[] run(Object function, Use destination) {
        return run(function, destination, 1);
    }

    /** As {@link #run(Object, Use)}; a join is applied to {@code branches} lists of the probe. */
    @SuppressWarnings("unchecked")
    private static String[] run(Object function, Use destination, int branches) {
        NDArray probe =
                (NDArray)
                        Proxy.newProxyInstance(
                                NDArray.class.getClassLoader(),
                                new Class<?>[] {NDArray.class},
                                (proxy, method, args) -> {
                                    throw new Reached(caller());
                                });
        Object argument;
        if (destination == Use.JOIN) {
            List<NDList> lists = new ArrayList<>();
            for (int i = 0; i < branches; i++) {
                lists.add(new NDList(probe));
            }
            argument = lists;
        } else {
            argument = destination == Use.SINGLETON ? probe : new NDList(probe);
        }
        try {
            ((Function<Object, Object>) function).apply(argument);
        } catch (Reached reached) {
            return reached.implementation;
        } catch (Exception | LinkageError e) {
            return null; // a checked exception thrown past the compiler, too
        }
        return null;
    }

    /** The frame just above {@link #run}'s: the implementation the lambda called. */
    private static String[] caller() {
        List<StackWalker.StackFrame> frames =
                StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE)
                        .walk(s -> s.collect(java.util.stream.Collectors.toList()));
        for (int i = 1; i < frames.size(); i++) {
            StackWalker.StackFrame frame = frames.get(i);
            if (frame.getDeclaringClass() == LambdaProbe.class
                    && "run".equals(frame.getMethodName())) {
                StackWalker.StackFrame above = frames.get(i - 1);
                return new String[] {
                    Type.getInternalName(above.getDeclaringClass()),
                    above.getMethodName(),
                    above.getDescriptor()
                };
            }
        }
        return null;
    }

    /**
     * Whether the method {@code handle} names does nothing, before its first call of an {@code
     * NDArray} method, that the probe could make happen: see the class comment.
     */
    private static boolean stopsBeforeAnythingElse(Handle handle, ClassLoader loader) {
        if (handle.getTag() != Opcodes.H_INVOKESTATIC) {
            return false;
        }
        MethodNode method = method(handle, loader);
        if (method == null
                || !method.tryCatchBlocks.isEmpty()
                || (method.access & Opcodes.ACC_SYNCHRONIZED) != 0) {
            return false;
        }
        // copies of an array the method just made, on the stack: javac fills an array it makes
        // with DUP, index, value, store; a store needs one copy left for the next, so no store
        // reaches an array from elsewhere
        int copies = 0;
        for (AbstractInsnNode insn : method.instructions) {
            int opcode = insn.getOpcode();
            if (opcode < 0) {
                continue; // labels, line numbers
            }
            if (opcode == Opcodes.NEWARRAY || opcode == Opcodes.ANEWARRAY) {
                copies = 1;
                continue;
            }
            if (opcode == Opcodes.DUP && copies > 0) {
                copies++;
                continue;
            }
            if (opcode >= Opcodes.IASTORE && opcode <= Opcodes.SASTORE) {
                if (copies < 2) {
                    return false;
                }
                copies--;
                continue;
            }
            if (isConstant(insn) || isPrimitiveLoad(opcode)) {
                continue;
            }
            copies = 0;
            if (insn instanceof MethodInsnNode) {
                MethodInsnNode call = (MethodInsnNode) insn;
                if (NDARRAY.equals(call.owner) && opcode == Opcodes.INVOKEINTERFACE) {
                    return true;
                }
                if (NDLIST.equals(call.owner) && LIST_READS.contains(call.name + call.desc)) {
                    continue;
                }
                return false;
            }
            if (opcode == Opcodes.ALOAD
                    || opcode == Opcodes.ASTORE
                    || (opcode >= Opcodes.ISTORE && opcode <= Opcodes.DSTORE)
                    || opcode == Opcodes.DUP
                    || opcode == Opcodes.CHECKCAST
                    || isArithmetic(opcode)
                    || (opcode == Opcodes.NEW && NDLIST.equals(((TypeInsnNode) insn).desc))
                    || (opcode == Opcodes.GETSTATIC
                            && DATA_TYPE.equals(((FieldInsnNode) insn).owner))) {
                continue;
            }
            return false;
        }
        return false;
    }

    private static MethodNode method(Handle handle, ClassLoader loader) {
        try {
            Class<?> owner = Class.forName(handle.getOwner().replace('/', '.'), false, loader);
            return SafeLambdaBodies.methodsOf(owner).get(handle.getName() + handle.getDesc());
        } catch (ClassNotFoundException | LinkageError e) {
            return null;
        }
    }

    private static boolean isConstant(AbstractInsnNode insn) {
        int opcode = insn.getOpcode();
        if (opcode >= Opcodes.ACONST_NULL && opcode <= Opcodes.DCONST_1) {
            return true;
        }
        if (insn instanceof IntInsnNode) {
            return opcode == Opcodes.BIPUSH || opcode == Opcodes.SIPUSH;
        }
        if (insn instanceof LdcInsnNode) {
            Object constant = ((LdcInsnNode) insn).cst;
            return constant instanceof Number || constant instanceof String;
        }
        return false;
    }

    private static boolean isPrimitiveLoad(int opcode) {
        return opcode >= Opcodes.ILOAD && opcode <= Opcodes.DLOAD;
    }

    private static boolean isArithmetic(int opcode) {
        return (opcode >= Opcodes.IADD && opcode <= Opcodes.LXOR)
                || (opcode >= Opcodes.I2L && opcode <= Opcodes.I2S);
    }

    /** Thrown by the probe's first method: where it was called from. */
    private static final class Reached extends Error {
        private static final long serialVersionUID = 1L;
        private final transient String[] implementation;

        Reached(String[] implementation) {
            super(null, null, false, false);
            this.implementation = implementation;
        }
    }
}
