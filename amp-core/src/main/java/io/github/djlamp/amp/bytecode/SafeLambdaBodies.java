package io.github.djlamp.amp.bytecode;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import org.objectweb.asm.ConstantDynamic;
import org.objectweb.asm.Handle;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.Type;
import org.objectweb.asm.tree.AbstractInsnNode;
import org.objectweb.asm.tree.ClassNode;
import org.objectweb.asm.tree.FieldInsnNode;
import org.objectweb.asm.tree.InvokeDynamicInsnNode;
import org.objectweb.asm.tree.LdcInsnNode;
import org.objectweb.asm.tree.MethodInsnNode;
import org.objectweb.asm.tree.MethodNode;

/**
 * Whether a lambda a user wrote only does what is safe on bf16 arrays, read from its body in the
 * class file of the class that wrote it: d2l-java's GoogLeNet joins its branches with {@code list
 * -> new NDList(NDArrays.concat(new NDList(list.stream().map(NDList::head)...), 1))}, which ran in
 * fp32 with a cast on each side because a lambda of unknown content may call softmax, and DJL's
 * PyTorch engine terminates the JVM when softmax meets a bf16 array.
 *
 * <p>A body is safe when every method it calls, and every method a lambda it makes runs, is
 *
 * <ul>
 *   <li>one of {@link #DJL_MEMBERS}: members of {@code NDArray}, {@code NDArrays} and {@code
 *       NDList} that pass no data type to native code, each run on bf16 arrays, forward and
 *       backward, by {@code SafeMembersOnBf16Test} in a child JVM;
 *   <li>a DJL function {@link KnownLambdas} lists with a bf16 kernel ({@code Activation.relu});
 *   <li>a member of a JDK collection, stream or number type ({@link #JDK_MEMBERS}) that runs no
 *       code but what it is handed, or of DJL's {@code Shape};
 *   <li>a static or private method of the same class, whose body is safe in turn (at most {@value
 *       #MAX_DEPTH} calls deep).
 * </ul>
 *
 * <p>and it can be handed no code from outside: the values the lambda captures and the fields it
 * reads are numbers, strings, shapes, arrays of numbers, or DJL arrays and lists of them ({@link
 * #INERT}), it writes no field, and the only functions it hands to a stream are lambdas it makes
 * itself, checked the same way. A lambda that captures {@code this}, a function or any other object
 * is not safe, whatever it does: what such an object runs cannot be read here.
 */
public final class SafeLambdaBodies {

    private static final int MAX_DEPTH = 4;

    private static final String LAMBDA_METAFACTORY = "java/lang/invoke/LambdaMetafactory";

    /** DJL's Shape: a value of plain Java, every member allowed. */
    private static final String SHAPE = "ai/djl/ndarray/types/Shape";

    /**
     * DJL members that pass no data type to native code on bf16 arrays: "owner.name(descriptor)".
     * Each has a scenario in {@code SafeMembersOnBf16Test}, which fails for an entry without one.
     * Left out although they run on bf16: what PyTorch's autocast computes in fp32 for accuracy
     * ({@code exp}, {@code sum}, {@code pow}, reductions such as {@code mean}): code that calls
     * them keeps its fp32 treatment; and {@code matMul}, a 16-bit product the kernel check would
     * not see inside a user's code (djl-amp checks the products it runs itself, attention's).
     */
    public static final Set<String> DJL_MEMBERS =
            Set.of(
                    "ai/djl/ndarray/NDArray.add(Lai/djl/ndarray/NDArray;)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.sub(Lai/djl/ndarray/NDArray;)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.mul(Lai/djl/ndarray/NDArray;)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.div(Lai/djl/ndarray/NDArray;)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.maximum(Lai/djl/ndarray/NDArray;)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.minimum(Lai/djl/ndarray/NDArray;)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.neg()Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.abs()Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.reshape([J)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.reshape(Lai/djl/ndarray/types/Shape;)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.transpose()Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.transpose([I)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.swapAxes(II)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.expandDims(I)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.squeeze(I)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.squeeze([I)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.squeeze()Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.flatten()Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.concat(Lai/djl/ndarray/NDArray;I)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArray.getShape()Lai/djl/ndarray/types/Shape;",
                    "ai/djl/ndarray/NDArray.oneHot(I)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDList.set(ILjava/lang/Object;)Ljava/lang/Object;",
                    "ai/djl/ndarray/NDArray.getNDArrayInternal()Lai/djl/ndarray/internal/NDArrayEx;",
                    "ai/djl/ndarray/internal/NDArrayEx.relu()Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/internal/NDArrayEx.sigmoid()Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/internal/NDArrayEx.tanh()Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArrays.concat(Lai/djl/ndarray/NDList;)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArrays.concat(Lai/djl/ndarray/NDList;I)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArrays.stack(Lai/djl/ndarray/NDList;)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArrays.stack(Lai/djl/ndarray/NDList;I)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDArrays.add([Lai/djl/ndarray/NDArray;)Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDList.<init>()V",
                    "ai/djl/ndarray/NDList.<init>(I)V",
                    "ai/djl/ndarray/NDList.<init>([Lai/djl/ndarray/NDArray;)V",
                    "ai/djl/ndarray/NDList.<init>(Ljava/util/Collection;)V",
                    "ai/djl/ndarray/NDList.head()Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDList.singletonOrThrow()Lai/djl/ndarray/NDArray;",
                    "ai/djl/ndarray/NDList.get(I)Ljava/lang/Object;",
                    "ai/djl/ndarray/NDList.size()I",
                    "ai/djl/ndarray/NDList.isEmpty()Z",
                    "ai/djl/ndarray/NDList.add(Ljava/lang/Object;)Z",
                    "ai/djl/ndarray/NDList.addAll(Lai/djl/ndarray/NDList;)Lai/djl/ndarray/NDList;",
                    "ai/djl/ndarray/NDList.subNDList(I)Lai/djl/ndarray/NDList;",
                    "ai/djl/ndarray/NDList.stream()Ljava/util/stream/Stream;",
                    "ai/djl/ndarray/NDList.iterator()Ljava/util/Iterator;");

    /**
     * JDK members that run no code but what they are handed and never call an element's {@code
     * equals}, {@code hashCode} or {@code toString} (DJL's {@code equals} on arrays compares
     * contents): "owner.name", any descriptor. Every member of {@code java/lang/Math} too.
     */
    private static final Set<String> JDK_MEMBERS = jdkMembers();

    private static Set<String> jdkMembers() {
        Set<String> members = new HashSet<>();
        String[] collections = {"java/util/List", "java/util/Collection", "java/util/ArrayList"};
        for (String owner : collections) {
            for (String name :
                    List.of(
                            "<init>",
                            "get",
                            "size",
                            "isEmpty",
                            "stream",
                            "iterator",
                            "add",
                            "addAll",
                            "subList",
                            "toArray",
                            "of",
                            "copyOf")) {
                members.add(owner + "." + name);
            }
        }
        for (String name : List.of("hasNext", "next")) {
            members.add("java/util/Iterator." + name);
        }
        members.add("java/util/Arrays.asList");
        members.add("java/util/Arrays.stream");
        members.add("java/util/Objects.requireNonNull");
        for (String name :
                List.of(
                        "map",
                        "flatMap",
                        "filter",
                        "collect",
                        "toList",
                        "toArray",
                        "limit",
                        "skip",
                        "reduce",
                        "forEach",
                        "of",
                        "count",
                        "iterator")) {
            members.add("java/util/stream/Stream." + name);
        }
        members.add("java/util/stream/Collectors.toList");
        for (String name : List.of("range", "rangeClosed", "mapToObj", "forEach", "boxed")) {
            members.add("java/util/stream/IntStream." + name);
        }
        for (String box : List.of("Integer", "Long", "Float", "Double")) {
            for (String name :
                    List.of("valueOf", "intValue", "longValue", "floatValue", "doubleValue")) {
                members.add("java/lang/" + box + "." + name);
            }
        }
        return Set.copyOf(members);
    }

    /** Types of captured values and fields that cannot carry code. */
    private static final Set<String> INERT =
            Set.of(
                    "I",
                    "J",
                    "F",
                    "D",
                    "Z",
                    "S",
                    "B",
                    "C",
                    "[I",
                    "[J",
                    "[F",
                    "[D",
                    "Ljava/lang/Integer;",
                    "Ljava/lang/Long;",
                    "Ljava/lang/Float;",
                    "Ljava/lang/Double;",
                    "Ljava/lang/String;",
                    "Lai/djl/ndarray/types/Shape;",
                    "Lai/djl/ndarray/NDArray;",
                    "Lai/djl/ndarray/NDList;");

    /** What a block's code may call to list the children a view of them holds. */
    private static final Set<String> VIEW_MEMBERS =
            Set.of(
                    "ai/djl/nn/SequentialBlock.getChildren()Lai/djl/nn/BlockList;",
                    "ai/djl/nn/AbstractBlock.getChildren()Lai/djl/nn/BlockList;",
                    "ai/djl/nn/Block.getChildren()Lai/djl/nn/BlockList;",
                    "ai/djl/nn/BlockList.values()Ljava/util/List;");

    /** A block's forward, with and without labels, as a body may call a child's. */
    private static final Set<String> CHILD_FORWARDS =
            Set.of(
                    "(Lai/djl/training/ParameterStore;Lai/djl/ndarray/NDList;Z)Lai/djl/ndarray/NDList;",
                    "(Lai/djl/training/ParameterStore;Lai/djl/ndarray/NDList;ZLai/djl/util/PairList;)"
                            + "Lai/djl/ndarray/NDList;");

    private static final ClassValue<Map<String, MethodNode>> METHODS =
            new ClassValue<>() {
                @Override
                protected Map<String, MethodNode> computeValue(Class<?> type) {
                    ClassNode node = LambdaSites.classNode(type);
                    Map<String, MethodNode> methods = new HashMap<>();
                    if (node != null) {
                        for (MethodNode method : node.methods) {
                            methods.put(method.name + method.desc, method);
                        }
                    }
                    return methods;
                }
            };

    private SafeLambdaBodies() {}

    /**
     * The methods of {@code type}'s class file by "name(descriptor)", read once; empty when it
     * cannot be read.
     */
    static Map<String, MethodNode> methodsOf(Class<?> type) {
        return METHODS.get(type);
    }

    /**
     * Returns whether the lambda site's body, a method of {@code capturing}, is safe on bf16
     * arrays.
     *
     * @param capturing the class that wrote the lambda
     * @param implementation the method the lambda runs
     * @param captured the descriptors of the values it captures
     * @param knownFunction DJL functions known to have a bf16 kernel, by "owner.name(descriptor)"
     */
    static boolean isSafe(
            Class<?> capturing,
            Handle implementation,
            List<String> captured,
            Predicate<String> knownFunction) {
        if (!INERT.containsAll(captured)) {
            return false;
        }
        return new Reading(capturing, knownFunction, Set.of(), Set.of()).safe(implementation, 0);
    }

    /**
     * One reading of a body and what it calls; remembers what it has seen. A block's own forward
     * ({@code policy.ReadableBlocks}) may also read the fields that hold its children and call
     * their forward.
     */
    public static final class Reading {
        private final String owner;
        private final Map<String, MethodNode> methods;
        private final Predicate<String> knownFunction;
        private final Set<String> childFields;
        private final Set<String> viewFields;
        private final Set<String> seen = new HashSet<>();
        private String stop;

        /**
         * Starts a reading of code in {@code capturing}.
         *
         * @param capturing the class whose methods are read
         * @param knownFunction DJL functions known to have a bf16 kernel
         * @param childFields "owner.name" of the fields holding the block's children, which may be
         *     read and whose forward may be called; empty for a lambda
         * @param viewFields "owner.name" of the fields holding a view of the block's children (a
         *     SequentialBlock listing them), which may be read and whose children may be listed
         */
        public Reading(
                Class<?> capturing,
                Predicate<String> knownFunction,
                Set<String> childFields,
                Set<String> viewFields) {
            this.owner = Type.getInternalName(capturing);
            this.methods = METHODS.get(capturing);
            this.knownFunction = knownFunction;
            this.childFields = childFields;
            this.viewFields = viewFields;
        }

        /**
         * Whether the method {@code name + desc} of the class read is safe.
         *
         * @param name its name
         * @param desc its descriptor
         * @return whether its body is safe on bf16 arrays
         */
        public boolean safeMethod(String name, String desc) {
            MethodNode method = methods.get(name + desc);
            if (method == null) {
                return stopped("its class file has no " + name);
            }
            return seen.add(owner + "." + name + desc) && safeBody(method, 0);
        }

        /**
         * Returns what the reading stopped at, for a message: "calls
         * ai.djl.ndarray.NDArray.softmax", or null where it did not stop.
         *
         * @return the first thing read that is not known safe, or null
         */
        public String stoppedAt() {
            return stop;
        }

        private boolean stopped(String what) {
            if (stop == null) {
                stop = what;
            }
            return false;
        }

        private static String javaName(String internalName) {
            return internalName.replace('/', '.');
        }

        /** A method a lambda runs (a site's implementation). */
        boolean safe(Handle handle, int depth) {
            return safeCall(handle.getOwner(), handle.getName(), handle.getDesc(), depth);
        }

        private boolean safeCall(String callOwner, String name, String desc, int depth) {
            String key = callOwner + "." + name + desc;
            if (DJL_MEMBERS.contains(key)
                    || JDK_MEMBERS.contains(callOwner + "." + name)
                    || "java/lang/Math".equals(callOwner)
                    || SHAPE.equals(callOwner)
                    || knownFunction.test(key)) {
                return true;
            }
            boolean block = !childFields.isEmpty() || !viewFields.isEmpty();
            if (block && "forward".equals(name) && CHILD_FORWARDS.contains(desc)) {
                return true; // a child's forward: only children can be reached (fields checked)
            }
            if (!viewFields.isEmpty() && VIEW_MEMBERS.contains(key)) {
                return true; // listing a view's children: they are the block's (fields checked)
            }
            if (!owner.equals(callOwner)) {
                return stopped("calls " + javaName(callOwner) + "." + name);
            }
            if (depth >= MAX_DEPTH) {
                return stopped("calls its own methods more than " + MAX_DEPTH + " deep");
            }
            MethodNode method = methods.get(name + desc);
            if (method == null
                    || (method.access & (Opcodes.ACC_STATIC | Opcodes.ACC_PRIVATE)) == 0) {
                // an overridable method may run a subclass's code
                return stopped("calls its overridable method " + name);
            }
            return !seen.add(key) || safeBody(method, depth + 1);
        }

        private boolean safeBody(MethodNode method, int depth) {
            for (AbstractInsnNode insn : method.instructions) {
                if (insn instanceof MethodInsnNode) {
                    MethodInsnNode call = (MethodInsnNode) insn;
                    if (!safeCall(call.owner, call.name, call.desc, depth)) {
                        return false;
                    }
                } else if (insn instanceof InvokeDynamicInsnNode) {
                    InvokeDynamicInsnNode indy = (InvokeDynamicInsnNode) insn;
                    if (!LAMBDA_METAFACTORY.equals(indy.bsm.getOwner())
                            || indy.bsmArgs.length < 3
                            || !(indy.bsmArgs[1] instanceof Handle)) {
                        return stopped(
                                "uses invokedynamic (" + javaName(indy.bsm.getOwner()) + ")");
                    }
                    if (!inert(indy.desc)) {
                        return stopped(
                                "makes a lambda that captures an object that may carry code");
                    }
                    if (!safe((Handle) indy.bsmArgs[1], depth)) {
                        return false;
                    }
                } else if (insn instanceof FieldInsnNode) {
                    FieldInsnNode field = (FieldInsnNode) insn;
                    String fieldKey = field.owner + "." + field.name;
                    boolean child =
                            insn.getOpcode() == Opcodes.GETFIELD
                                    && (childFields.contains(fieldKey)
                                            || viewFields.contains(fieldKey));
                    if (insn.getOpcode() == Opcodes.PUTFIELD
                            || insn.getOpcode() == Opcodes.PUTSTATIC) {
                        return stopped("writes the field " + field.name);
                    }
                    if (!(child || INERT.contains(field.desc))) {
                        return stopped(
                                "reads the field "
                                        + field.name
                                        + " ("
                                        + Type.getType(field.desc).getClassName()
                                        + ", which may carry code)");
                    }
                } else if (insn instanceof LdcInsnNode) {
                    Object constant = ((LdcInsnNode) insn).cst;
                    if (constant instanceof Handle || constant instanceof ConstantDynamic) {
                        return stopped("loads a method handle");
                    }
                }
            }
            return true;
        }

        /** Whether every value a lambda site captures (its indy's arguments) is inert. */
        private static boolean inert(String indyDescriptor) {
            for (Type t : Type.getArgumentTypes(indyDescriptor)) {
                if (!INERT.contains(t.getDescriptor())) {
                    return false;
                }
            }
            return true;
        }
    }
}
