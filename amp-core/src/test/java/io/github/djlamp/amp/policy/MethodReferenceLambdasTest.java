package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.pooling.Pool;
import io.github.djlamp.amp.bytecode.KnownLambdas;
import io.github.djlamp.amp.cast.PrecisionSummary;
import java.io.InputStream;
import java.io.Serializable;
import java.lang.invoke.MethodHandles;
import java.net.URL;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * A LambdaBlock is known by the function it runs, read from the bytecode of the class that wrote
 * it, never by its name: d2l-java's {@code .add(Activation::relu)} and the other method references
 * to DJL's activations pass 16-bit arrays through, a user's lambda named "ReLU" does not.
 *
 * <p>Each nested class below is a capturing class of its own: what one class writes decides only
 * its own lambdas (see {@link KnownLambdas} on a class that mixes both), so this outer class writes
 * no lambda that could reach a LambdaBlock.
 */
class MethodReferenceLambdasTest {

    private static CastCategory category(Block block) {
        return DefaultCastRules.categoryOf(block);
    }

    private static Block child(Block parent, int index) {
        return parent.getChildren().get(index).getValue();
    }

    /** d2l-java's way: method references to DJL's activations, nothing else. */
    static final class D2lStyle {
        static final Function<NDList, NDList> STORED = Activation::relu;

        static List<Block> activations() {
            return List.of(
                    new LambdaBlock(Activation::relu),
                    new LambdaBlock(Activation::relu6),
                    new LambdaBlock(Activation::sigmoid),
                    new LambdaBlock(Activation::tanh),
                    new LambdaBlock(Activation::softPlus),
                    new LambdaBlock(Activation::softSign),
                    new LambdaBlock(Activation::selu),
                    new LambdaBlock(Activation::gelu),
                    new LambdaBlock(Activation::mish),
                    new LambdaBlock(STORED),
                    new LambdaBlock((Function<NDList, NDList> & Serializable) Activation::relu));
        }

        static SequentialBlock sequential() {
            return new SequentialBlock()
                    .add(Activation::relu)
                    .add(Activation::sigmoid)
                    .addSingleton(Activation::relu)
                    .addSingleton(Activation::tanh);
        }

        static List<Block> singletons() {
            return List.of(
                    LambdaBlock.singleton(Pool::globalAvgPool2d),
                    LambdaBlock.singleton(Pool::globalMaxPool2d, "pool"),
                    LambdaBlock.singleton(Blocks::batchFlatten));
        }

        /** A d2l-java-style network: convolution, batch norm, relu, pooling, linear. */
        static SequentialBlock network() {
            return new SequentialBlock()
                    .add(conv(4))
                    .add(BatchNorm.builder().build())
                    .add(Activation::relu)
                    .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                    .add(conv(8))
                    .add(BatchNorm.builder().build())
                    .add(Activation::relu)
                    .add(Pool.avgPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                    .add(Blocks.batchFlattenBlock())
                    .add(Linear.builder().setUnits(16).build())
                    .add(Activation::relu)
                    .add(Linear.builder().setUnits(10).build());
        }

        static Conv2d conv(int filters) {
            return Conv2d.builder()
                    .setKernelShape(new Shape(3, 3))
                    .optPadding(new Shape(1, 1))
                    .setFilters(filters)
                    .build();
        }
    }

    @Test
    void methodReferencesToDjlActivationsPassThrough() {
        for (Block block : D2lStyle.activations()) {
            assertEquals(CastCategory.PASS_THROUGH, category(block), block.toString());
            assertTrue(DefaultCastRules.knowsSafeIn16Bits(block));
        }
        SequentialBlock sequential = D2lStyle.sequential();
        for (int i = 0; i < 4; i++) {
            assertEquals(CastCategory.PASS_THROUGH, category(child(sequential, i)), "" + i);
        }
        for (Block block : D2lStyle.singletons()) {
            assertEquals(CastCategory.PASS_THROUGH, category(block), block.toString());
        }
    }

    @Test
    void aD2lNetworkHasNoFp32Unit() {
        Block net = D2lStyle.network();
        PrecisionSummary summary = PrecisionSummary.of(net, PrecisionPolicy.mixedBfloat16());
        assertEquals(0, summary.getFp32Units(), summary.toString());
        assertEquals(List.of(), summary.getFp32Islands(), summary.toString());
        assertNull(DefaultCastRules.bf16HazardIn(net, ""));
    }

    /** What today's trust by name let through: a user's softmax named after DJL's ReLU. */
    static final class NamedSoftmax {
        static List<Block> blocks() {
            return List.of(
                    new LambdaBlock(x -> new NDList(x.head().softmax(-1)), "ReLU"),
                    LambdaBlock.singleton(x -> x.softmax(-1), "ReLU"),
                    LambdaBlock.singleton(x -> x.softmax(-1), "maxPool2d"),
                    new LambdaBlock(x -> x, "identity"));
        }

        static SequentialBlock sequential() {
            return new SequentialBlock().add(x -> new NDList(x.head().softmax(-1)), "GELU");
        }
    }

    @Test
    void aUserLambdaWithDjlsNameIsNot() {
        for (Block block : NamedSoftmax.blocks()) {
            assertEquals(CastCategory.FP32, category(block), block.toString());
            assertFalse(DefaultCastRules.knowsSafeIn16Bits(block));
        }
        Block named = child(NamedSoftmax.sequential(), 0);
        assertEquals(CastCategory.FP32, category(named));
        assertNotNull(DefaultCastRules.bf16HazardIn(NamedSoftmax.sequential(), ""));
    }

    /** A user's method called relu, referenced as d2l references DJL's. */
    static final class UserMethod {
        static NDList relu(NDList x) {
            return new NDList(x.head().softmax(-1));
        }

        static Block block() {
            return new LambdaBlock(UserMethod::relu, "ReLU");
        }
    }

    @Test
    void aMethodReferenceToAUsersMethodIsNot() {
        assertEquals(CastCategory.FP32, category(UserMethod.block()));
    }

    /** A capturing lambda that calls a DJL activation: its body is the user's. */
    static final class Capturing {
        static Block block(float alpha) {
            return new LambdaBlock(x -> Activation.leakyRelu(x, alpha), "LeakyReLU");
        }
    }

    @Test
    void aCapturingLambdaIsNot() {
        assertEquals(CastCategory.FP32, category(Capturing.block(0.1f)));
        assertEquals(CastCategory.PASS_THROUGH, category(Activation.leakyReluBlock(0.1f)));
    }

    /** An anonymous class: not a lambda, nothing to read. */
    static final class Anonymous {
        static Block block() {
            return new LambdaBlock(
                    new Function<NDList, NDList>() {
                        @Override
                        public NDList apply(NDList x) {
                            return Activation.relu(x);
                        }
                    },
                    "ReLU");
        }
    }

    @Test
    void anAnonymousClassIsNot() {
        assertEquals(CastCategory.FP32, category(Anonymous.block()));
    }

    /**
     * A class with both a DJL method reference and a user lambda that reach LambdaBlocks: which
     * object came from which site cannot be told, so neither is known.
     */
    static final class Mixed {
        static SequentialBlock sequential() {
            return new SequentialBlock().add(Activation::relu).add(x -> UnknownCode.same(x));
        }
    }

    @Test
    void aUserLambdaInTheSameClassMakesBothUnknown() {
        SequentialBlock mixed = Mixed.sequential();
        assertEquals(CastCategory.FP32, category(child(mixed, 0)));
        assertEquals(CastCategory.FP32, category(child(mixed, 1)));
    }

    /**
     * A join written beside the method reference: it goes into a ParallelBlock, never a
     * LambdaBlock, and a stream's mapper goes nowhere, so neither makes the relu unknown.
     */
    static final class WithJoin {
        static SequentialBlock sequential() {
            return new SequentialBlock()
                    .add(Activation::relu)
                    .add(
                            new ParallelBlock(
                                    list ->
                                            new NDList(
                                                    list.stream()
                                                            .map(NDList::head)
                                                            .reduce((a, b) -> a.add(b))
                                                            .orElseThrow()
                                                            .softmax(-1)),
                                    List.of(new SequentialBlock(), new SequentialBlock())));
        }
    }

    @Test
    void aJoinInTheSameClassDoesNotSpoilTheMethodReference() {
        SequentialBlock net = WithJoin.sequential();
        assertEquals(CastCategory.PASS_THROUGH, category(child(net, 0)));
        assertFalse(DefaultCastRules.hasKnownJoin((ParallelBlock) child(net, 1)));
    }

    /** A class that takes its own lookup: it could spin lambdas in its name anywhere. */
    static final class LeaksLookup {
        static Object lookup() {
            return MethodHandles.lookup();
        }

        static Block block() {
            return new LambdaBlock(Activation::relu);
        }
    }

    @Test
    void aClassThatTakesItsLookupIsNotRead() {
        assertNotNull(LeaksLookup.lookup());
        assertEquals(CastCategory.FP32, category(LeaksLookup.block()));
    }

    /**
     * D2lStyle loaded again from its bytes by a loader that serves no class file for it, as for a
     * class generated at run time: its method references are unknown.
     */
    @Test
    void aClassWithoutAClassFileFallsBackToFp32() throws Exception {
        String name = D2lStyle.class.getName();
        String resource = name.replace('.', '/') + ".class";
        byte[] bytes;
        try (InputStream in = D2lStyle.class.getResourceAsStream("/" + resource)) {
            bytes = in.readAllBytes();
        }
        ClassLoader loader = new NoClassFileLoader(name, bytes, D2lStyle.class.getClassLoader());
        Class<?> copy = Class.forName(name, true, loader);
        assertEquals(loader, copy.getClassLoader());
        java.lang.reflect.Method activations = copy.getDeclaredMethod("activations");
        activations.setAccessible(true); // another runtime package, though the same name
        @SuppressWarnings("unchecked")
        List<Block> blocks = (List<Block>) activations.invoke(null);
        for (Block block : blocks) {
            assertEquals(CastCategory.FP32, category(block), block.toString());
        }
        // the same bytes, found: known
        assertEquals(CastCategory.PASS_THROUGH, category(D2lStyle.activations().get(0)));
    }

    /** Defines one class from given bytes and hides its class file. */
    private static final class NoClassFileLoader extends ClassLoader {
        private final String name;
        private final byte[] bytes;

        NoClassFileLoader(String name, byte[] bytes, ClassLoader parent) {
            super(parent);
            this.name = name;
            this.bytes = bytes;
        }

        @Override
        protected Class<?> loadClass(String className, boolean resolve)
                throws ClassNotFoundException {
            if (!name.equals(className)) {
                return super.loadClass(className, resolve);
            }
            synchronized (getClassLoadingLock(className)) {
                Class<?> loaded = findLoadedClass(className);
                return loaded != null ? loaded : defineClass(className, bytes, 0, bytes.length);
            }
        }

        @Override
        public URL getResource(String resource) {
            return resource.endsWith(name.replace('.', '/') + ".class")
                    ? null
                    : super.getResource(resource);
        }

        @Override
        public InputStream getResourceAsStream(String resource) {
            return getResource(resource) == null ? null : super.getResourceAsStream(resource);
        }

        @Override
        protected URL findResource(String resource) {
            return null;
        }
    }
}
