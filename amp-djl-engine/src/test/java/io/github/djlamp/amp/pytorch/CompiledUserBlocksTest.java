package io.github.djlamp.amp.pytorch;

import static io.github.djlamp.amp.pytorch.CompiledSteps.assertCompiledAsEager;
import static io.github.djlamp.amp.pytorch.CompiledSteps.assertSameArrays;
import static io.github.djlamp.amp.pytorch.CompiledSteps.compiledStep;
import static io.github.djlamp.amp.pytorch.CompiledSteps.initialize;
import static io.github.djlamp.amp.pytorch.CompiledSteps.step;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.pooling.Pool;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.verify.KernelVerification;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * Blocks a user writes, compiled: a residual unit as d2l-java writes it (an AbstractBlock whose
 * forward hands its input to a ParallelBlock joined by a lambda of its own: add, then relu), one
 * written by hand (children called through its fields, the shortcut chosen by whether a field is
 * null), and a user's join in a container, among them d2l-java's GoogLeNet's, which concatenates
 * its branches' heads through a stream, and a dense block that walks its children. djl-amp runs the
 * first two as one 16-bit unit and reads their code; compiled, each network is one native call,
 * bitwise DJL's eager fp32 and djl-amp's eager bf16, and code it cannot read runs eagerly, named
 * with what it calls.
 */
class CompiledUserBlocksTest {

    private static final Shape IMAGES = new Shape(2, 3, 8, 8);

    @Test
    void d2lResidualsAreBitwiseDjl() {
        assertFp32Bitwise(CompiledUserBlocksTest::d2lResNet);
    }

    @Test
    void d2lResidualsInBf16AreTheEagerBf16Wrapper() {
        assertBf16AsEager(
                CompiledUserBlocksTest::d2lResNet, KernelVerification.OFF, "mixed_bfloat16");
    }

    /** With the kernel checks on, each unit's verdict decides its precision and layout. */
    @Test
    void d2lResidualsInBf16WithKernelChecksAreTheEagerBf16Wrapper() {
        assertBf16AsEager(
                CompiledUserBlocksTest::d2lResNet, KernelVerification.ON, "mixed_bfloat16");
    }

    /** A unit the policy puts in fp32 runs in fp32 between 16-bit layers. */
    @Test
    void aResidualThePolicyKeepsInFp32IsTheEagerBf16Wrapper() {
        assertBf16AsEager(
                CompiledUserBlocksTest::d2lResNet,
                KernelVerification.OFF,
                "mixed_bfloat16[class:" + DelegatingResidual.class.getName() + "=fp32]");
    }

    @Test
    void handWrittenResidualsAreBitwiseDjl() {
        assertFp32Bitwise(CompiledUserBlocksTest::handWrittenResNet);
    }

    @Test
    void handWrittenResidualsInBf16AreTheEagerBf16Wrapper() {
        assertBf16AsEager(
                CompiledUserBlocksTest::handWrittenResNet,
                KernelVerification.OFF,
                "mixed_bfloat16");
    }

    @Test
    void aUserJoinInAContainerIsBitwiseDjl() {
        assertFp32Bitwise(CompiledUserBlocksTest::userJoin);
    }

    @Test
    void aUserJoinInAContainerInBf16IsTheEagerBf16Wrapper() {
        assertBf16AsEager(
                CompiledUserBlocksTest::userJoin, KernelVerification.OFF, "mixed_bfloat16");
    }

    @Test
    void inceptionBlocksJoinedByAStreamAreBitwiseDjl() {
        assertFp32Bitwise(CompiledUserBlocksTest::googLeNet);
    }

    @Test
    void inceptionBlocksJoinedByAStreamInBf16AreTheEagerBf16Wrapper() {
        assertBf16AsEager(
                CompiledUserBlocksTest::googLeNet, KernelVerification.OFF, "mixed_bfloat16");
    }

    @Test
    void denseBlocksThatWalkTheirChildrenAreBitwiseDjl() {
        assertFp32Bitwise(CompiledUserBlocksTest::denseNet);
    }

    @Test
    void denseBlocksThatWalkTheirChildrenInBf16AreTheEagerBf16Wrapper() {
        assertBf16AsEager(
                CompiledUserBlocksTest::denseNet, KernelVerification.OFF, "mixed_bfloat16");
    }

    /**
     * A unit whose forward calls what the reading does not know ({@code sub}) runs eagerly, named
     * with the call, and the blocks around it still compile.
     */
    @Test
    void aForwardThatCannotBeReadRunsEagerlyNamingTheCall() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block plain = scaledResNet();
            NDArray x = initialize(plain, manager, IMAGES);
            List<float[]> eager = step(plain, x);
            Block block = scaledResNet();
            initialize(block, manager, IMAGES);
            MixedPrecisionBlock wrapped = Amp.wrap(block, "float32").compileForward(true);
            assertSameArrays(eager, compiledStep(wrapped, x));
            assertFalse(wrapped.isForwardCompiled(x.getDevice()));
            String refusal = wrapped.compiledForwardRefusal(x.getDevice());
            assertTrue(
                    refusal.contains("05ScaledResidual: its code calls ai.djl.ndarray.NDArray.sub"),
                    refusal);
            assertEquals(2, wrapped.compiledRuns(x.getDevice()).size(), refusal);
        }
    }

    /**
     * d2l-java's ResNet in small: a stem, two residuals (the second strided, projected), a head.
     */
    private static Block d2lResNet() {
        return stem().add(new DelegatingResidual(4, false, new Shape(1, 1)))
                .add(new DelegatingResidual(6, true, new Shape(2, 2)))
                .add(Pool.globalAvgPool2dBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    private static Block handWrittenResNet() {
        return stem().add(new HandWrittenResidual(4, false, new Shape(1, 1)))
                .add(new HandWrittenResidual(6, true, new Shape(2, 2)))
                .add(Pool.globalAvgPool2dBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    private static Block scaledResNet() {
        return stem().add(new DelegatingResidual(4, false, new Shape(1, 1)))
                .add(new ScaledResidual(4))
                .add(new DelegatingResidual(6, true, new Shape(2, 2)))
                .add(Pool.globalAvgPool2dBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    /** A ParallelBlock whose lambda adds its branches, then DJL's relu, in a SequentialBlock. */
    private static Block userJoin() {
        return stem().add(
                        new ParallelBlock(
                                list ->
                                        new NDList(
                                                list.get(0)
                                                        .singletonOrThrow()
                                                        .add(list.get(1).singletonOrThrow())),
                                Arrays.asList(
                                        new SequentialBlock().add(convolution(4, 3, 1)),
                                        new SequentialBlock().add(Blocks.identityBlock()))))
                .add(Activation::relu)
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    /** Two Inception blocks as d2l-java's GoogLeNet writes them, their branches concatenated. */
    private static Block googLeNet() {
        return stem().add(inception(2, 3, 2))
                .add(inception(3, 2, 2))
                .add(Pool.globalAvgPool2dBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    private static ParallelBlock inception(int c1, int c2, int c3) {
        SequentialBlock p1 = new SequentialBlock().add(convolution(c1, 1, 1)).add(Activation::relu);
        SequentialBlock p2 =
                new SequentialBlock()
                        .add(convolution(c2, 1, 1))
                        .add(Activation::relu)
                        .add(convolution(c2, 3, 1))
                        .add(Activation::relu);
        SequentialBlock p3 =
                new SequentialBlock()
                        .add(Pool.maxPool2dBlock(new Shape(3, 3), new Shape(1, 1), new Shape(1, 1)))
                        .add(convolution(c3, 1, 1))
                        .add(Activation::relu);
        return new ParallelBlock(
                list -> {
                    List<NDArray> heads =
                            list.stream().map(NDList::head).collect(Collectors.toList());
                    return new NDList(NDArrays.concat(new NDList(heads), 1));
                },
                Arrays.asList(p1, p2, p3));
    }

    /** Two dense blocks as d2l-java's DenseNet writes them, a transition between. */
    private static Block denseNet() {
        return stem().add(new DenseBlock(2, 3))
                .add(BatchNorm.builder().build())
                .add(Activation::relu)
                .add(convolution(4, 1, 1))
                .add(Pool.avgPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                .add(new DenseBlock(2, 2))
                .add(Pool.globalAvgPool2dBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    private static SequentialBlock stem() {
        return new SequentialBlock()
                .add(convolution(4, 3, 1))
                .add(BatchNorm.builder().build())
                .add(Activation::relu);
    }

    private static Conv2d convolution(int filters, int kernel, int stride) {
        return Conv2d.builder()
                .setFilters(filters)
                .setKernelShape(new Shape(kernel, kernel))
                .optPadding(new Shape(kernel / 2, kernel / 2))
                .optStride(new Shape(stride, stride))
                .build();
    }

    private static void assertFp32Bitwise(Supplier<Block> network) {
        assertCompiledAsEager(network, IMAGES, 1f, "float32", KernelVerification.ON).assertWhole();
    }

    private static void assertBf16AsEager(
            Supplier<Block> network, KernelVerification checks, String policy) {
        assertCompiledAsEager(network, IMAGES, 1f, policy, checks).assertWhole();
    }

    /** As d2l-java writes its residual: a ParallelBlock held in a field, joined by a lambda. */
    public static final class DelegatingResidual extends AbstractBlock {

        private final ParallelBlock block;

        DelegatingResidual(int channels, boolean project, Shape stride) {
            SequentialBlock body =
                    new SequentialBlock()
                            .add(convolution(channels, 3, (int) stride.get(0)))
                            .add(BatchNorm.builder().build())
                            .add(Activation::relu)
                            .add(convolution(channels, 3, 1))
                            .add(BatchNorm.builder().build());
            SequentialBlock shortcut = new SequentialBlock();
            shortcut.add(
                    project
                            ? convolution(channels, 1, (int) stride.get(0))
                            : Blocks.identityBlock());
            block =
                    addChildBlock(
                            "residualBlock",
                            new ParallelBlock(
                                    list -> {
                                        NDList unit = list.get(0);
                                        NDList parallel = list.get(1);
                                        return new NDList(
                                                unit.singletonOrThrow()
                                                        .add(parallel.singletonOrThrow())
                                                        .getNDArrayInternal()
                                                        .relu());
                                    },
                                    Arrays.asList(body, shortcut)));
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore parameterStore,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            return block.forward(parameterStore, inputs, training);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return block.getOutputShapes(inputs);
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            block.initialize(manager, dataType, inputShapes);
        }
    }

    /** A residual written by hand: fields, an optional projection, DJL's relu, add. */
    public static final class HandWrittenResidual extends AbstractBlock {

        private final Conv2d first;
        private final BatchNorm firstNorm;
        private final Conv2d second;
        private final BatchNorm secondNorm;
        private final Conv2d projection;

        HandWrittenResidual(int channels, boolean project, Shape stride) {
            int step = (int) stride.get(0);
            first = addChildBlock("first", convolution(channels, 3, step));
            firstNorm = addChildBlock("firstNorm", BatchNorm.builder().build());
            second = addChildBlock("second", convolution(channels, 3, 1));
            secondNorm = addChildBlock("secondNorm", BatchNorm.builder().build());
            projection =
                    project ? addChildBlock("projection", convolution(channels, 1, step)) : null;
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList x, boolean training, PairList<String, Object> params) {
            NDList y = first.forward(store, x, training);
            y = firstNorm.forward(store, y, training);
            y = new NDList(Activation.relu(y.head()));
            y = second.forward(store, y, training);
            y = secondNorm.forward(store, y, training);
            NDArray shortcut =
                    projection == null ? x.head() : projection.forward(store, x, training).head();
            return new NDList(Activation.relu(y.head().add(shortcut)));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            Shape[] shapes = inputs;
            for (Block layer : new Block[] {first, firstNorm, second, secondNorm}) {
                shapes = layer.getOutputShapes(shapes);
            }
            return shapes;
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            Shape[] shapes = inputShapes;
            for (Block layer : new Block[] {first, firstNorm, second, secondNorm}) {
                layer.initialize(manager, dataType, shapes);
                shapes = layer.getOutputShapes(shapes);
            }
            if (projection != null) {
                projection.initialize(manager, dataType, inputShapes);
            }
        }
    }

    /**
     * A dense block as d2l-java writes one: its convolution blocks registered one by one and listed
     * in a SequentialBlock it walks, each output concatenated to the input.
     */
    public static final class DenseBlock extends AbstractBlock {

        private final SequentialBlock net = new SequentialBlock();

        DenseBlock(int convolutions, int channels) {
            for (int i = 0; i < convolutions; i++) {
                net.add(
                        addChildBlock(
                                "denseBlock" + i,
                                new SequentialBlock()
                                        .add(BatchNorm.builder().build())
                                        .add(Activation::relu)
                                        .add(convolution(channels, 3, 1))));
            }
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList x, boolean training, PairList<String, Object> params) {
            NDArray y;
            for (Block block : net.getChildren().values()) {
                y = block.forward(store, x, training).singletonOrThrow();
                x = new NDList(NDArrays.concat(new NDList(x.singletonOrThrow(), y), 1));
            }
            return x;
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            Shape shape = inputs[0];
            for (Block block : net.getChildren().values()) {
                long added = block.getOutputShapes(new Shape[] {shape})[0].get(1);
                shape = new Shape(shape.get(0), shape.get(1) + added, shape.get(2), shape.get(3));
            }
            return new Shape[] {shape};
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            Shape shape = inputShapes[0];
            for (Block block : net.getChildren().values()) {
                block.initialize(manager, dataType, shape);
                long added = block.getOutputShapes(new Shape[] {shape})[0].get(1);
                shape = new Shape(shape.get(0), shape.get(1) + added, shape.get(2), shape.get(3));
            }
        }
    }

    /** A residual that subtracts its shortcut ({@code sub}): code the reading does not know. */
    public static final class ScaledResidual extends AbstractBlock {

        private final Conv2d convolution;

        ScaledResidual(int channels) {
            convolution = addChildBlock("convolution", convolution(channels, 3, 1));
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList x, boolean training, PairList<String, Object> params) {
            NDArray y = convolution.forward(store, x, training).head();
            return new NDList(y.sub(x.head()));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return convolution.getOutputShapes(inputs);
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            convolution.initialize(manager, dataType, inputShapes);
        }
    }
}
