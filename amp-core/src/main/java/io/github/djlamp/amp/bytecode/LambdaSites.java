package io.github.djlamp.amp.bytecode;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.objectweb.asm.ClassReader;
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
import org.objectweb.asm.tree.TypeInsnNode;
import org.objectweb.asm.tree.analysis.Analyzer;
import org.objectweb.asm.tree.analysis.AnalyzerException;
import org.objectweb.asm.tree.analysis.Interpreter;
import org.objectweb.asm.tree.analysis.Value;

/**
 * Which {@code invokedynamic} instruction of which class may have made a given Java lambda, read
 * from the class file of the class that wrote it.
 *
 * <h2>Why the class file</h2>
 *
 * <p>On JDK 17 a lambda object does not say what it runs: its class is a hidden class spun by
 * {@code LambdaMetafactory}, whose bytes cannot be read ({@code getResource} does not find hidden
 * classes), {@code MethodHandles.Lookup.revealDirect} takes direct method handles only, a {@code
 * SerializedLambda} exists only for serializable lambdas, and {@code
 * -Djdk.internal.lambda.dumpProxyClasses} is a debugging switch. Invoking it to find out runs the
 * user's code. What can be read is the capturing class: the hidden class is named after the class
 * whose {@code invokedynamic} made it ({@code Capturing$$Lambda$N/0x...} on JDK 17, {@code
 * Capturing$$Lambda/0x...} later), is its nestmate, and that class's file lists every lambda site
 * with its implementation method handle ({@code ai/djl/nn/Activation.relu(NDList)NDList} for {@code
 * Activation::relu}). Which of the sites made a given object cannot be read, so the answer is a
 * set: every site of the class that may have made it.
 *
 * <h2>Narrowing the set, soundly</h2>
 *
 * <p>Each test below removes only sites that cannot have made the object:
 *
 * <ul>
 *   <li>The object's class implements the site's functional interface (the {@code invokedynamic}'s
 *       return type; marker interfaces of {@code altMetafactory} sites only add to the list) and
 *       declares the site's method name.
 *   <li>The object's instance fields are the site's captured values: their types, as a multiset,
 *       are the {@code invokedynamic}'s parameter types.
 *   <li>The site's result can reach the place the object was found. An abstract interpretation of
 *       each method (ASM's {@link Analyzer}) follows every site's value through the operand stack
 *       and local variables and records where it goes: into {@code new LambdaBlock(f[, name])},
 *       into {@code new ParallelBlock(f, ...)} (a join) or into the static {@code
 *       LambdaBlock.singleton(f[, name])} ({@link Use}); these calls are not virtual, so the
 *       destination is exact. So is {@code add(f[, name])} or {@code addSingleton(f[, name])} of a
 *       SequentialBlock the method made with {@code new SequentialBlock()} (or got back from one of
 *       those calls on it, which return their receiver): its class is exactly DJL's, whose {@code
 *       add} makes {@code new LambdaBlock(f)} and whose {@code addSingleton} calls {@code
 *       LambdaBlock.singleton(f)} (DJL 0.35.1 and 0.36.0), so DJL's YOLOv3 upsampling lambdas are
 *       no candidates for its residual joins. A function passed to an operation of {@code
 *       java.util.stream.Stream} ({@code list.stream().map(NDList::head)}, as in GoogLeNet's joins)
 *       is applied there and goes nowhere (assumed of the interface: an implementation outside the
 *       JDK that keeps its mappers and hands them out is not a case this class guards against).
 *       Anything else (a field, an array, a return, a captured value of another lambda, any other
 *       method, {@code SequentialBlock.add(f)} included, since a subclass may override it) is an
 *       {@link Use#ESCAPE}: the site stays a candidate for every destination. A site whose value is
 *       only popped or only applied is a candidate for none.
 * </ul>
 *
 * <h2>When nothing is said</h2>
 *
 * <p>{@link #candidates} answers null (unknown: the caller falls back to fp32) when the object is
 * not a JDK lambda (not hidden, not synthetic, no {@code $$Lambda} in its name: a Proxy, an
 * ordinary class, GraalVM's or retrolambda's lambdas), when its capturing class cannot be loaded or
 * is not its nest host's nestmate, when the class file cannot be found (classes generated at run
 * time) or read (a class file version this ASM does not know), when no site fits (the class file on
 * disk is not the loaded class), and when the capturing class may make lambdas other than through
 * its own {@code invokedynamic} sites: it refers to {@code LambdaMetafactory}, {@code
 * MethodHandles} or {@code MethodHandles.Lookup} outside a {@code LambdaMetafactory} bootstrap slot
 * (its own lookup handed to code that could spin lambdas in its name), or it has an {@code
 * invokedynamic} or dynamic constant bootstrapped by a method other than the JDK's lambda,
 * string-concatenation, record, switch and constant bootstraps (a bootstrap receives the class's
 * full-privilege lookup).
 *
 * <p>Out of reach of any reading of bytecode, and not guarded: another class that obtains this
 * class's lookup ({@code MethodHandles.privateLookupIn}) and spins lambdas with it, and a class
 * redefined at run time by an agent. Both are deliberate use of {@code java.lang.invoke} or
 * instrumentation, not a lambda a user wrote.
 */
public final class LambdaSites {

    /** Where a lambda site's value may go. */
    enum Use {
        /** the function of a {@code new LambdaBlock(f)} or {@code new LambdaBlock(f, name)} */
        LAMBDA_BLOCK,
        /** the per-array function {@code LambdaBlock.singleton(f[, name])} wraps */
        SINGLETON,
        /** the join of a {@code new ParallelBlock(f, ...)} */
        JOIN,
        /** anywhere: the value left the method by another way */
        ESCAPE
    }

    /**
     * One {@code invokedynamic} bootstrapped by {@code LambdaMetafactory}.
     *
     * @param interfaceName the functional interface's internal name
     * @param methodName the interface method the lambda implements
     * @param captured the descriptors of the captured values, sorted
     * @param implementation the method the lambda calls
     * @param uses where its value may go
     */
    record Site(
            String interfaceName,
            String methodName,
            List<String> captured,
            Handle implementation,
            Set<Use> uses) {}

    private static final String LAMBDA_METAFACTORY = "java/lang/invoke/LambdaMetafactory";
    private static final String LAMBDA_BLOCK = "ai/djl/nn/LambdaBlock";
    private static final String PARALLEL_BLOCK = "ai/djl/nn/ParallelBlock";
    private static final String SEQUENTIAL_BLOCK = "ai/djl/nn/SequentialBlock";
    private static final String FUNCTION = "java/util/function/Function";
    private static final String FUNCTION_DESCRIPTOR = "L" + FUNCTION + ";";

    /** DJL's SequentialBlock methods that return their receiver. */
    private static final Set<String> RETURNS_RECEIVER = Set.of("add", "addSingleton", "addAll");

    /**
     * The JDK's stream interface: a function handed to one of its operations ({@code map}, {@code
     * flatMap}, {@code collect}'s collectors...) is applied to the elements and kept nowhere a
     * caller can take it back from. Assumed of every Stream, though a class outside the JDK could
     * implement the interface otherwise.
     */
    private static final String STREAM = "java/util/stream/Stream";

    /** Owners whose use gives the class's lookup away or spins lambdas outside an indy. */
    private static final Set<String> LOOKUP_OWNERS =
            Set.of(
                    LAMBDA_METAFACTORY,
                    "java/lang/invoke/MethodHandles",
                    "java/lang/invoke/MethodHandles$Lookup");

    /** JDK bootstraps that spin no lambda and pass the caller's lookup to nothing else. */
    private static final Set<String> PLAIN_BOOTSTRAPS =
            Set.of(
                    "java/lang/invoke/StringConcatFactory",
                    "java/lang/invoke/ConstantBootstraps",
                    "java/lang/runtime/ObjectMethods",
                    "java/lang/runtime/SwitchBootstraps");

    /** The lambda sites of a capturing class, or why they are not known. */
    private record Table(List<Site> sites, String unknown) {}

    private static final ClassValue<Table> TABLES =
            new ClassValue<>() {
                @Override
                protected Table computeValue(Class<?> type) {
                    try {
                        return read(type);
                    } catch (RuntimeException | IOException | LinkageError e) {
                        return new Table(List.of(), "unreadable: " + e);
                    }
                }
            };

    private LambdaSites() {}

    /**
     * Returns the sites of {@code function}'s capturing class that may have made it and may have
     * handed it to {@code destination}.
     *
     * @param function a function object
     * @param destination where it was found
     * @return the candidate sites, never empty; null when they cannot be told
     */
    static List<Site> candidates(Object function, Use destination) {
        Class<?> lambdaClass = function.getClass();
        Class<?> capturing = capturingClass(lambdaClass);
        if (capturing == null) {
            return null;
        }
        Table table = TABLES.get(capturing);
        if (table.unknown != null) {
            return null;
        }
        Set<String> interfaces = new HashSet<>();
        for (Class<?> i : lambdaClass.getInterfaces()) {
            interfaces.add(Type.getInternalName(i));
        }
        Set<String> methods = new HashSet<>();
        for (Method m : lambdaClass.getDeclaredMethods()) {
            methods.add(m.getName());
        }
        List<String> fields = new ArrayList<>();
        for (Field f : lambdaClass.getDeclaredFields()) {
            if (!Modifier.isStatic(f.getModifiers())) {
                fields.add(Type.getDescriptor(f.getType()));
            }
        }
        Collections.sort(fields);
        List<Site> candidates = new ArrayList<>();
        for (Site site : table.sites) {
            if (interfaces.contains(site.interfaceName)
                    && methods.contains(site.methodName)
                    && fields.equals(site.captured)
                    && (site.uses.contains(Use.ESCAPE) || site.uses.contains(destination))) {
                candidates.add(site);
            }
        }
        return candidates.isEmpty() ? null : candidates;
    }

    /**
     * Returns the class whose {@code invokedynamic} made a JDK lambda class, or null when {@code
     * lambdaClass} is not one.
     */
    static Class<?> capturingClass(Class<?> lambdaClass) {
        if (!lambdaClass.isHidden() || !lambdaClass.isSynthetic()) {
            return null;
        }
        String name = lambdaClass.getName();
        int marker = name.lastIndexOf("$$Lambda");
        if (marker <= 0) {
            return null;
        }
        try {
            Class<?> capturing =
                    Class.forName(name.substring(0, marker), false, lambdaClass.getClassLoader());
            return capturing.getNestHost() == lambdaClass.getNestHost() ? capturing : null;
        } catch (ClassNotFoundException | LinkageError | SecurityException e) {
            return null;
        }
    }

    /**
     * Returns the class file of {@code type} as read by ASM, or null when it cannot be found or
     * read or is not the loaded class's.
     */
    static ClassNode classNode(Class<?> type) {
        try {
            return readNode(type);
        } catch (RuntimeException | IOException | LinkageError e) {
            return null;
        }
    }

    private static ClassNode readNode(Class<?> type) throws IOException {
        String internalName = Type.getInternalName(type);
        byte[] bytes;
        try (InputStream in = type.getResourceAsStream("/" + internalName + ".class")) {
            if (in == null) {
                return null;
            }
            bytes = in.readAllBytes();
        }
        ClassNode node = new ClassNode();
        new ClassReader(bytes).accept(node, ClassReader.SKIP_FRAMES | ClassReader.SKIP_DEBUG);
        return internalName.equals(node.name) ? node : null;
    }

    private static Table read(Class<?> type) throws IOException {
        ClassNode node = readNode(type);
        if (node == null) {
            return new Table(List.of(), "no class file of " + type.getName() + " to read");
        }
        List<Site> sites = new ArrayList<>();
        for (MethodNode method : node.methods) {
            Map<AbstractInsnNode, Integer> indices = new IdentityHashMap<>();
            for (AbstractInsnNode insn : method.instructions) {
                String unknown = lookupLeak(insn);
                if (unknown != null) {
                    return new Table(List.of(), unknown);
                }
                if (isLambdaSite(insn)) {
                    indices.put(insn, sites.size());
                    sites.add(site((InvokeDynamicInsnNode) insn));
                }
            }
            if (!indices.isEmpty()) {
                follow(node.name, method, indices, sites);
            }
        }
        return new Table(List.copyOf(sites), null);
    }

    /** Why {@code insn} may spin lambdas in the class's name, or null. */
    private static String lookupLeak(AbstractInsnNode insn) {
        if (insn instanceof MethodInsnNode
                && LOOKUP_OWNERS.contains(((MethodInsnNode) insn).owner)) {
            return "calls " + ((MethodInsnNode) insn).owner + "." + ((MethodInsnNode) insn).name;
        }
        if (insn instanceof LdcInsnNode) {
            return constantLeak(((LdcInsnNode) insn).cst);
        }
        if (insn instanceof InvokeDynamicInsnNode) {
            InvokeDynamicInsnNode indy = (InvokeDynamicInsnNode) insn;
            if (!LAMBDA_METAFACTORY.equals(indy.bsm.getOwner())
                    && !PLAIN_BOOTSTRAPS.contains(indy.bsm.getOwner())) {
                return "bootstrap " + indy.bsm.getOwner() + "." + indy.bsm.getName();
            }
            for (Object arg : indy.bsmArgs) {
                String leak = constantLeak(arg);
                if (leak != null) {
                    return leak;
                }
            }
        }
        return null;
    }

    private static String constantLeak(Object constant) {
        if (constant instanceof Handle && LOOKUP_OWNERS.contains(((Handle) constant).getOwner())) {
            return "method handle to " + ((Handle) constant).getOwner();
        }
        if (constant instanceof ConstantDynamic) {
            ConstantDynamic condy = (ConstantDynamic) constant;
            if (!PLAIN_BOOTSTRAPS.contains(condy.getBootstrapMethod().getOwner())) {
                return "dynamic constant bootstrap " + condy.getBootstrapMethod().getOwner();
            }
            for (int i = 0; i < condy.getBootstrapMethodArgumentCount(); i++) {
                String leak = constantLeak(condy.getBootstrapMethodArgument(i));
                if (leak != null) {
                    return leak;
                }
            }
        }
        return null;
    }

    private static boolean isLambdaSite(AbstractInsnNode insn) {
        if (!(insn instanceof InvokeDynamicInsnNode)) {
            return false;
        }
        InvokeDynamicInsnNode indy = (InvokeDynamicInsnNode) insn;
        return LAMBDA_METAFACTORY.equals(indy.bsm.getOwner())
                && indy.bsmArgs.length >= 3
                && indy.bsmArgs[1] instanceof Handle;
    }

    private static Site site(InvokeDynamicInsnNode indy) {
        List<String> captured = new ArrayList<>();
        for (Type t : Type.getArgumentTypes(indy.desc)) {
            captured.add(t.getDescriptor());
        }
        Collections.sort(captured);
        return new Site(
                Type.getReturnType(indy.desc).getInternalName(),
                indy.name,
                List.copyOf(captured),
                (Handle) indy.bsmArgs[1],
                EnumSet.noneOf(Use.class));
    }

    /** Records where each site's value goes in {@code method}; all escape if it cannot be told. */
    private static void follow(
            String owner,
            MethodNode method,
            Map<AbstractInsnNode, Integer> indices,
            List<Site> sites) {
        try {
            new Analyzer<>(new Flows(indices, sites)).analyze(owner, method);
        } catch (AnalyzerException | RuntimeException e) {
            for (int index : indices.values()) {
                sites.get(index).uses.add(Use.ESCAPE);
            }
        }
    }

    /**
     * A value on the stack or in a local: its size, the lambda sites it may come from, and whether
     * it is certainly a SequentialBlock of exactly DJL's class.
     */
    private record Flow(int size, Set<Integer> sites, boolean exactSequential) implements Value {
        Flow(int size, Set<Integer> sites) {
            this(size, sites, false);
        }

        @Override
        public int getSize() {
            return size;
        }
    }

    /**
     * ASM's abstract interpreter, tracking lambda-site values only: copies (loads, stores, dups)
     * keep a value's sites, merges join them, and every instruction that consumes a value records a
     * {@link Use} for its sites.
     */
    private static final class Flows extends Interpreter<Flow> {
        private static final Flow ONE = new Flow(1, Set.of());
        private static final Flow TWO = new Flow(2, Set.of());
        private static final Flow SEQUENTIAL = new Flow(1, Set.of(), true);

        private final Map<AbstractInsnNode, Integer> indices;
        private final List<Site> sites;

        Flows(Map<AbstractInsnNode, Integer> indices, List<Site> sites) {
            super(Opcodes.ASM9);
            this.indices = indices;
            this.sites = sites;
        }

        private void use(Flow value, Use use) {
            for (int site : value.sites) {
                sites.get(site).uses.add(use);
            }
        }

        private static Flow sized(int size) {
            return size == 2 ? TWO : ONE;
        }

        @Override
        public Flow newValue(Type type) {
            if (type == Type.VOID_TYPE) {
                return null;
            }
            return sized(type == null ? 1 : type.getSize());
        }

        @Override
        public Flow newOperation(AbstractInsnNode insn) {
            switch (insn.getOpcode()) {
                case Opcodes.LCONST_0:
                case Opcodes.LCONST_1:
                case Opcodes.DCONST_0:
                case Opcodes.DCONST_1:
                    return TWO;
                case Opcodes.LDC:
                    Object cst = ((LdcInsnNode) insn).cst;
                    return cst instanceof Long || cst instanceof Double ? TWO : ONE;
                case Opcodes.GETSTATIC:
                    return sized(Type.getType(((FieldInsnNode) insn).desc).getSize());
                case Opcodes.NEW:
                    return SEQUENTIAL_BLOCK.equals(((TypeInsnNode) insn).desc) ? SEQUENTIAL : ONE;
                default:
                    return ONE;
            }
        }

        @Override
        public Flow copyOperation(AbstractInsnNode insn, Flow value) {
            return value;
        }

        @Override
        public Flow unaryOperation(AbstractInsnNode insn, Flow value) {
            int opcode = insn.getOpcode();
            if (opcode != Opcodes.IFNULL
                    && opcode != Opcodes.IFNONNULL
                    && opcode != Opcodes.INSTANCEOF) {
                use(value, Use.ESCAPE);
            }
            switch (opcode) {
                case Opcodes.I2L:
                case Opcodes.I2D:
                case Opcodes.L2D:
                case Opcodes.F2L:
                case Opcodes.F2D:
                case Opcodes.D2L:
                case Opcodes.LNEG:
                case Opcodes.DNEG:
                    return TWO;
                case Opcodes.GETFIELD:
                    return sized(Type.getType(((FieldInsnNode) insn).desc).getSize());
                default:
                    return ONE;
            }
        }

        @Override
        public Flow binaryOperation(AbstractInsnNode insn, Flow value1, Flow value2) {
            use(value1, Use.ESCAPE);
            use(value2, Use.ESCAPE);
            switch (insn.getOpcode()) {
                case Opcodes.LALOAD:
                case Opcodes.DALOAD:
                case Opcodes.LADD:
                case Opcodes.DADD:
                case Opcodes.LSUB:
                case Opcodes.DSUB:
                case Opcodes.LMUL:
                case Opcodes.DMUL:
                case Opcodes.LDIV:
                case Opcodes.DDIV:
                case Opcodes.LREM:
                case Opcodes.DREM:
                case Opcodes.LSHL:
                case Opcodes.LSHR:
                case Opcodes.LUSHR:
                case Opcodes.LAND:
                case Opcodes.LOR:
                case Opcodes.LXOR:
                    return TWO;
                default:
                    return ONE;
            }
        }

        @Override
        public Flow ternaryOperation(AbstractInsnNode insn, Flow value1, Flow value2, Flow value3) {
            use(value1, Use.ESCAPE);
            use(value2, Use.ESCAPE);
            use(value3, Use.ESCAPE);
            return ONE;
        }

        @Override
        public Flow naryOperation(AbstractInsnNode insn, List<? extends Flow> values) {
            if (insn instanceof MethodInsnNode) {
                MethodInsnNode call = (MethodInsnNode) insn;
                Type[] parameters = Type.getArgumentTypes(call.desc);
                int first = values.size() - parameters.length; // 1 with a receiver
                boolean exactReceiver =
                        first == 1
                                && call.getOpcode() == Opcodes.INVOKEVIRTUAL
                                && SEQUENTIAL_BLOCK.equals(call.owner)
                                && values.get(0).exactSequential();
                for (int i = 0; i < values.size(); i++) {
                    Flow value = values.get(i);
                    if (value.sites.isEmpty()) {
                        continue;
                    }
                    if (i < first) {
                        // the receiver: applying the function stores it nowhere
                        if (!(FUNCTION.equals(call.owner) && "apply".equals(call.name))) {
                            use(value, Use.ESCAPE);
                        }
                    } else {
                        Use use = destination(call, parameters[i - first], exactReceiver);
                        if (use != null) {
                            use(value, use);
                        }
                    }
                }
                if (exactReceiver && RETURNS_RECEIVER.contains(call.name)) {
                    return SEQUENTIAL;
                }
                return sized(Type.getReturnType(call.desc).getSize());
            }
            for (Flow value : values) {
                use(value, Use.ESCAPE);
            }
            if (insn instanceof InvokeDynamicInsnNode) {
                InvokeDynamicInsnNode indy = (InvokeDynamicInsnNode) insn;
                Integer site = indices.get(insn);
                int size = Type.getReturnType(indy.desc).getSize();
                return site == null ? sized(size) : new Flow(size, Set.of(site));
            }
            return ONE; // MULTIANEWARRAY
        }

        /**
         * Where a value passed as a parameter of type {@code parameter} to {@code call} goes; null
         * where it is only applied. {@code exactReceiver}: the call is DJL's own SequentialBlock
         * method, on a receiver of exactly that class.
         */
        private static Use destination(MethodInsnNode call, Type parameter, boolean exactReceiver) {
            if (STREAM.equals(call.owner)) {
                return null;
            }
            if (!FUNCTION_DESCRIPTOR.equals(parameter.getDescriptor())) {
                return Use.ESCAPE;
            }
            if (call.getOpcode() == Opcodes.INVOKESPECIAL && "<init>".equals(call.name)) {
                if (LAMBDA_BLOCK.equals(call.owner)) {
                    return Use.LAMBDA_BLOCK;
                }
                if (PARALLEL_BLOCK.equals(call.owner)) {
                    return Use.JOIN;
                }
            }
            if (call.getOpcode() == Opcodes.INVOKESTATIC
                    && LAMBDA_BLOCK.equals(call.owner)
                    && "singleton".equals(call.name)) {
                return Use.SINGLETON;
            }
            if (exactReceiver && "add".equals(call.name)) {
                return Use.LAMBDA_BLOCK;
            }
            if (exactReceiver && "addSingleton".equals(call.name)) {
                return Use.SINGLETON;
            }
            return Use.ESCAPE;
        }

        @Override
        public void returnOperation(AbstractInsnNode insn, Flow value, Flow expected) {
            use(value, Use.ESCAPE);
        }

        @Override
        public Flow merge(Flow value1, Flow value2) {
            int size = value1.size == value2.size ? value1.size : 1;
            boolean exact = value1.exactSequential() && value2.exactSequential();
            if (value1.sites.containsAll(value2.sites)) {
                return size == value1.size && exact == value1.exactSequential()
                        ? value1
                        : new Flow(size, value1.sites, exact);
            }
            Set<Integer> union = new HashSet<>(value1.sites);
            union.addAll(value2.sites);
            return new Flow(size, Set.copyOf(union), exact);
        }
    }
}
