package io.github.djlamp.amp.bytecode;

import ai.djl.nn.Activation;
import ai.djl.nn.Blocks;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.pooling.Pool;
import io.github.djlamp.amp.bytecode.LambdaSites.Use;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.internal.DjlSeam;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.function.Supplier;
import org.objectweb.asm.Handle;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.Type;

/**
 * The {@link LambdaBlock}s that are safe to run on 16-bit input as they are: those whose function
 * is verifiably one of DJL's own element-wise activations, poolings or reshapes.
 *
 * <p>A LambdaBlock's name proves nothing: a user's {@code new LambdaBlock(x -> softmax(x), "ReLU")}
 * carries DJL's name for ReLU, and softmax on a bf16 array terminates the JVM in DJL's PyTorch
 * engine. What is verified is the function object: {@link LambdaSites} reads the class file of the
 * class that wrote the lambda and gives the lambda sites that may have made it; the block is known
 * only when every one of them calls a function in the tables below. That covers
 *
 * <ul>
 *   <li>method references to DJL's functions written anywhere, the d2l-java style: {@code
 *       seq.add(Activation::relu)}, {@code new LambdaBlock(Activation::gelu)}, {@code
 *       seq.addSingleton(Activation::relu)}, {@code LambdaBlock.singleton(Pool::globalAvgPool2d)}.
 *       Such a lambda calls the function with its argument and does nothing else;
 *   <li>the lambdas DJL's factories write ({@code Activation.leakyReluBlock(a)}, {@code
 *       Pool.maxPool2dBlock(k)}, {@code Blocks.batchFlattenBlock(n)}, ...), recognised by their
 *       synthetic method ({@code lambda$maxPool2dBlock$1}) in DJL's own class, the class whose nest
 *       the lambda belongs to. {@code Activation.reluBlock()} and its like are method references,
 *       as above;
 *   <li>{@code LambdaBlock.singleton(f)}'s wrapper (its lambda in DJL's LambdaBlock), known when
 *       the function it wraps is;
 *   <li>a lambda a user wrote whose body {@link SafeLambdaBodies} reads as safe on bf16 arrays
 *       (d2l-java's GoogLeNet join: a concatenation of its branches).
 * </ul>
 *
 * <p>The DJL functions listed pass no data type to native code in DJL's PyTorch engine: their
 * {@code PtNDArrayEx} methods call {@code JniUtils.relu}, {@code sigmoid}, {@code tanh}, {@code
 * softPlus}, {@code softSign}, {@code leakyRelu}, {@code elu}, {@code selu}, {@code gelu} and the
 * pooling calls with the array's handle only; swish, mish and relu6 combine those with scalar
 * arithmetic, batchFlatten is a reshape. Each was run forward and backward, training and inference,
 * on a bf16 input made by the engine backend (DJL 0.35.1 and 0.36.0, PyTorch 2.7.1, CPU): each
 * returned bf16, close to its fp32 result, with gradients reaching the fp32 input.
 *
 * <p>Three of DJL's pooling lambdas stay fp32: {@code avgPool3d} (PyTorch 2.7.1 has no bf16 CPU
 * kernel: "avg_pool3d_out_frame not implemented for 'BFloat16'"), {@code lpPool3d} and {@code
 * globalLpPool3d} (DJL's PyTorch engine does not support them at all). Their lambdas capture the
 * same types as their 1d and 2d siblings', so the site analysis cannot tell them apart: among
 * candidate sites that are all DJL's own, the block's name, set by the DJL factory that made it,
 * picks the one. A name is never trusted where any candidate is not DJL's.
 *
 * <p>Left out (fp32): a lambda of unknown content (a user lambda whose body calls what {@link
 * SafeLambdaBodies} does not list, a method reference to a user's method, a lambda that captures an
 * object that may carry code), {@code Blocks.onesBlock} (makes new arrays of a fixed type rather
 * than transforming its input), and a DJL function written in a class that also writes a lambda of
 * unknown content that may reach the same place: with {@code .add(Activation::relu)} and {@code
 * .add(x -> custom(x))} in one class both are fp32, as their objects cannot be told apart on JDK 17
 * (a join passed to {@code new ParallelBlock(...)} does not count: its destination is known),
 * unless {@link LambdaProbe} tells them apart. {@code Activation.reluBlock()}, or the user's lambda
 * in a class of its own, avoids that.
 */
public final class KnownLambdas {

    /**
     * What a known implementation method is.
     *
     * @param label the name DJL's factory gives the block that runs it
     * @param bf16Kernel false for a DJL function with no bf16 kernel or no PyTorch support
     * @param wrapper whether it is {@code LambdaBlock.singleton}'s wrapper, known by what it wraps
     */
    private record Known(String label, boolean bf16Kernel, boolean wrapper) {}

    private static final String NDLIST = "Lai/djl/ndarray/NDList;";
    private static final String NDARRAY = "Lai/djl/ndarray/NDArray;";
    private static final String ON_LIST = "(" + NDLIST + ")" + NDLIST;
    private static final String ON_ARRAY = "(" + NDARRAY + ")" + NDARRAY;
    private static final String LAMBDA_PREFIX = "lambda$";

    /** A lambda of a user's whose body {@link SafeLambdaBodies} reads as safe on bf16 arrays. */
    private static final Known SAFE_BODY = new Known("lambda", true, false);

    /** DJL's public static functions a method reference may name: "owner.name(desc)". */
    private static final Map<String, Known> FUNCTIONS = new HashMap<>();

    /**
     * The lambdas DJL's factories write, by "owner.enclosingMethod" of the synthetic method javac
     * names {@code lambda$enclosingMethod$N}.
     */
    private static final Map<String, Known> FACTORY_LAMBDAS = new HashMap<>();

    /** The DJL classes whose lambdas {@link #FACTORY_LAMBDAS} lists. */
    private static final Set<Class<?>> FACTORY_CLASSES =
            Set.of(Activation.class, Pool.class, Blocks.class, LambdaBlock.class);

    static {
        String activation = Type.getInternalName(Activation.class);
        String pool = Type.getInternalName(Pool.class);
        String blocks = Type.getInternalName(Blocks.class);
        String[][] activations = {
            {"relu", "ReLU"},
            {"relu6", "ReLU6"},
            {"sigmoid", "sigmoid"},
            {"tanh", "Tanh"},
            {"softPlus", "softPlus"},
            {"softSign", "softSign"},
            {"selu", "SELU"},
            {"gelu", "GELU"},
            {"mish", "Mish"}
        };
        for (String[] a : activations) {
            function(activation, a[0], ON_LIST, a[1]);
            function(activation, a[0], ON_ARRAY, a[1]);
        }
        for (String global :
                List.of(
                        "globalMaxPool1d",
                        "globalMaxPool2d",
                        "globalMaxPool3d",
                        "globalAvgPool1d",
                        "globalAvgPool2d",
                        "globalAvgPool3d")) {
            function(pool, global, ON_ARRAY, global);
        }
        function(blocks, "batchFlatten", ON_ARRAY, "batchFlatten");

        factoryLambda(activation, "leakyReluBlock", "LeakyReLU", true);
        factoryLambda(activation, "eluBlock", "ELU", true);
        factoryLambda(activation, "swishBlock", "Swish", true);
        for (String kind : List.of("maxPool", "avgPool", "lpPool", "globalLpPool")) {
            factoryLambda(pool, kind + "1dBlock", kind + "1d", true);
            factoryLambda(pool, kind + "2dBlock", kind + "2d", true);
            factoryLambda(pool, kind + "3dBlock", kind + "3d", "maxPool".equals(kind));
        }
        factoryLambda(blocks, "batchFlattenBlock", "batchFlatten", true);
        factoryLambda(blocks, "identityBlock", "identity", true);
        FACTORY_LAMBDAS.put(
                Type.getInternalName(LambdaBlock.class) + ".singleton",
                new Known("singleton", true, true));
    }

    /**
     * Model-zoo classes of DJL whose ParallelBlock join functions are known (read from their
     * sources): ResNetV1 adds its two branches and applies relu, GoogLeNet and SqueezeNet
     * concatenate theirs on the channel axis. None calls softmax or makes arrays of its input's
     * data type.
     */
    private static final Set<String> JOIN_CAPTURERS =
            Set.of(
                    "ai.djl.basicmodelzoo.cv.classification.ResNetV1",
                    "ai.djl.basicmodelzoo.cv.classification.GoogLeNet",
                    "ai.djl.basicmodelzoo.cv.classification.SqueezeNet");

    private KnownLambdas() {}

    private static void function(String owner, String name, String descriptor, String label) {
        FUNCTIONS.put(owner + "." + name + descriptor, new Known(label, true, false));
    }

    private static void factoryLambda(
            String owner, String factory, String label, boolean bf16Kernel) {
        FACTORY_LAMBDAS.put(owner + "." + factory, new Known(label, bf16Kernel, false));
    }

    /**
     * Returns whether {@code lambda}'s function is verifiably one of DJL's functions that run on
     * 16-bit input as they are.
     *
     * @param lambda the block
     * @return whether its function is such a DJL function
     */
    public static boolean isPassThrough(LambdaBlock lambda) {
        Object function = functionOf(() -> DjlSeam.lambdaFunction(lambda));
        return function != null && isKnown(function, Use.LAMBDA_BLOCK, lambda.getName());
    }

    /**
     * Returns whether the join function of {@code block} is one of the model zoo's known ones, safe
     * on 16-bit branch outputs.
     *
     * @param block the parallel block
     * @return whether its join is known and safe
     */
    public static boolean isKnownJoin(ParallelBlock block) {
        Object join = functionOf(() -> DjlSeam.parallelJoin(block));
        return writtenIn(join, JOIN_CAPTURERS)
                || (join != null && isKnown(join, Use.JOIN, block.getClass().getSimpleName()));
    }

    /**
     * Whether every site that may have made {@code function} and handed it to {@code destination}
     * runs a known DJL function with a bf16 kernel; {@code blockName} chooses among candidates that
     * are all DJL's own.
     */
    private static boolean isKnown(Object function, Use destination, String blockName) {
        List<LambdaSites.Site> candidates = LambdaSites.candidates(function, destination);
        if (candidates == null) {
            return false;
        }
        Class<?> capturing = LambdaSites.capturingClass(function.getClass());
        Set<Known> known = knownOf(candidates, capturing);
        if (known == null) {
            // a site of unknown content may have made it: the probe may tell which one did
            List<LambdaSites.Site> made = LambdaProbe.narrow(function, destination, candidates);
            known = made.size() < candidates.size() ? knownOf(made, capturing) : null;
            if (known == null) {
                return false;
            }
        }
        if (known.stream().allMatch(Known::wrapper)) {
            Object wrapped = wrappedFunction(function);
            return wrapped != null && isKnown(wrapped, Use.SINGLETON, blockName);
        }
        if (known.stream().anyMatch(Known::wrapper)) {
            return false;
        }
        return known.stream().allMatch(Known::bf16Kernel)
                || known.stream().anyMatch(k -> k.bf16Kernel() && k.label().equals(blockName));
    }

    /** What each site runs, or null when one of them runs something not known. */
    private static Set<Known> knownOf(List<LambdaSites.Site> sites, Class<?> capturing) {
        Set<Known> known = new HashSet<>();
        for (LambdaSites.Site site : sites) {
            Known k = known(site, capturing);
            if (k == null) {
                return null;
            }
            known.add(k);
        }
        return known;
    }

    /** What the method a lambda site runs is, for a lambda written in {@code capturing}. */
    private static Known known(LambdaSites.Site site, Class<?> capturing) {
        Handle implementation = site.implementation();
        if (implementation.getTag() != Opcodes.H_INVOKESTATIC) {
            return null;
        }
        String owner = implementation.getOwner();
        String name = implementation.getName();
        Known function = FUNCTIONS.get(owner + "." + name + implementation.getDesc());
        if (function != null) {
            return function;
        }
        // javac puts a lambda's body in the class that wrote it, named lambda$<enclosing>$<n>
        int end = name.lastIndexOf('$');
        if (!owner.equals(Type.getInternalName(capturing))
                || !name.startsWith(LAMBDA_PREFIX)
                || end <= LAMBDA_PREFIX.length()) {
            return null;
        }
        if (FACTORY_CLASSES.contains(capturing)) {
            return FACTORY_LAMBDAS.get(owner + "." + name.substring(LAMBDA_PREFIX.length(), end));
        }
        return SafeLambdaBodies.isSafe(
                        capturing, implementation, site.captured(), KnownLambdas::isBf16Function)
                ? SAFE_BODY
                : null;
    }

    /**
     * The label of the one DJL function {@code lambda} runs ("ReLU", "batchFlatten",
     * "globalAvgPool2d", "identity"), or null when its sites disagree, run a user's body, or are
     * not known.
     *
     * @param lambda the block
     * @return the label, or null
     */
    public static String functionLabel(LambdaBlock lambda) {
        Object function = functionOf(() -> DjlSeam.lambdaFunction(lambda));
        return function == null ? null : label(function, Use.LAMBDA_BLOCK, lambda.getName());
    }

    /**
     * Where the sites that may have made {@code function} are several DJL functions (the method
     * references one factory class hands to {@code LambdaBlock.singleton}), the block's name, which
     * that factory sets, tells them apart, as {@link #isKnown} does; where it does not, or a site
     * of the user's own is among them, the probe tells which site made it where it can.
     */
    private static String label(Object function, Use destination, String blockName) {
        List<LambdaSites.Site> candidates = LambdaSites.candidates(function, destination);
        if (candidates == null) {
            return null;
        }
        Class<?> capturing = LambdaSites.capturingClass(function.getClass());
        Known only = single(knownOf(candidates, capturing), blockName);
        if (only == null && candidates.size() > 1) {
            // several sites of one class (Activation::relu and Activation::gelu): the probe may
            // tell which one made it
            List<LambdaSites.Site> made = LambdaProbe.narrow(function, destination, candidates);
            only =
                    made.size() < candidates.size()
                            ? single(knownOf(made, capturing), blockName)
                            : null;
        }
        if (only == null) {
            return null;
        }
        if (only.wrapper()) {
            Object wrapped = wrappedFunction(function);
            return wrapped == null ? null : label(wrapped, Use.SINGLETON, blockName);
        }
        return only.label();
    }

    /** The one DJL function of {@code known}, the block's name choosing among several, or null. */
    private static Known single(Set<Known> known, String blockName) {
        if (known == null || known.isEmpty() || known.contains(SAFE_BODY)) {
            return null;
        }
        if (known.size() > 1) {
            known.removeIf(k -> !k.label().equals(blockName));
        }
        return known.size() == 1 ? known.iterator().next() : null;
    }

    /**
     * Whether {@code block}'s join is ResNetV1's: the branches added, then relu.
     *
     * @param block the parallel block
     * @return whether ResNetV1 wrote its join
     */
    public static boolean isResNetJoin(ParallelBlock block) {
        return writtenIn(
                functionOf(() -> DjlSeam.parallelJoin(block)),
                Set.of("ai.djl.basicmodelzoo.cv.classification.ResNetV1"));
    }

    /**
     * Whether "owner.name(descriptor)" is a DJL function listed here with a bf16 kernel.
     *
     * @param key the member, as "owner.name(descriptor)"
     * @return whether it is listed with a bf16 kernel
     */
    public static boolean isBf16Function(String key) {
        Known function = FUNCTIONS.get(key);
        return function != null && function.bf16Kernel();
    }

    /**
     * The function {@code LambdaBlock.singleton} wrapped, where {@code function} is that wrapper;
     * else null.
     */
    static Object singletonWrapped(Object function) {
        List<LambdaSites.Site> candidates = LambdaSites.candidates(function, Use.LAMBDA_BLOCK);
        if (candidates == null) {
            return null;
        }
        Set<Known> known = knownOf(candidates, LambdaSites.capturingClass(function.getClass()));
        return known != null && !known.isEmpty() && known.stream().allMatch(Known::wrapper)
                ? wrappedFunction(function)
                : null;
    }

    /** The one function {@code LambdaBlock.singleton}'s wrapper captured, or null. */
    private static Object wrappedFunction(Object wrapper) {
        Field only = null;
        for (Field field : wrapper.getClass().getDeclaredFields()) {
            if (Modifier.isStatic(field.getModifiers())) {
                continue;
            }
            if (only != null || field.getType() != Function.class) {
                return null;
            }
            only = field;
        }
        if (only == null) {
            return null;
        }
        try {
            only.setAccessible(true);
            return only.get(wrapper);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /**
     * Returns whether the function of {@code lambda} was written in the code of one of {@code
     * vouched}: see {@link #writtenByVouched(Object, List)}.
     *
     * @param lambda the block
     * @param vouched the classes vouched for
     * @return whether one of them wrote its function
     */
    public static boolean lambdaWrittenBy(LambdaBlock lambda, List<Class<?>> vouched) {
        return !vouched.isEmpty()
                && writtenByVouched(functionOf(() -> DjlSeam.lambdaFunction(lambda)), vouched);
    }

    /**
     * Returns whether the join function of {@code block} was written in the code of one of {@code
     * vouched}: see {@link #writtenByVouched(Object, List)}.
     *
     * @param block the parallel block
     * @param vouched the classes vouched for
     * @return whether one of them wrote its join
     */
    public static boolean joinWrittenBy(ParallelBlock block, List<Class<?>> vouched) {
        return !vouched.isEmpty()
                && writtenByVouched(functionOf(() -> DjlSeam.parallelJoin(block)), vouched);
    }

    /**
     * Whether {@code function} is a Java lambda (or method reference) written in the code of a
     * block class someone vouches for ({@code LowPrecisionSafe}, {@code class:X=trusted}): in the
     * class itself, a class nested in it, or one of its superclasses outside DJL (d2l-java's {@code
     * Residual} writes its ParallelBlock's join and its {@code Activation::relu} in its
     * constructor). That code is the vouched block's own, under the same promise; a function
     * written elsewhere and handed in is not.
     */
    private static boolean writtenByVouched(Object function, List<Class<?>> vouched) {
        if (function == null) {
            return false;
        }
        String className = function.getClass().getName();
        int marker = className.indexOf("$$Lambda");
        if (marker <= 0) {
            return false;
        }
        String writer = className.substring(0, marker);
        for (Class<?> block : vouched) {
            for (Class<?> c = block; c != null; c = c.getSuperclass()) {
                if (c.getName().startsWith("ai.djl.") || c == Object.class) {
                    break;
                }
                if (writer.equals(c.getName()) || writer.startsWith(c.getName() + "$")) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Reads a function through the seam; null (unknown: not trusted) where DJL lacks its field. */
    private static Object functionOf(Supplier<Object> read) {
        try {
            return read.get();
        } catch (AmpException e) {
            return null;
        }
    }

    /**
     * Whether {@code function} was written in one of {@code classes}: a Java lambda's class is
     * named after the class that wrote it ({@code ResNetV1$$Lambda...}).
     */
    private static boolean writtenIn(Object function, Set<String> classes) {
        if (function == null) {
            return false;
        }
        String className = function.getClass().getName();
        int marker = className.indexOf("$$Lambda");
        return marker > 0 && classes.contains(className.substring(0, marker));
    }
}
