package io.github.djlamp.amp.policy;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.norm.LayerNorm;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import java.util.Arrays;

/** Blocks for the policy tests; none of them is ever run. */
final class TestBlocks {

    private TestBlocks() {}

    /** A leaf block djl-amp knows nothing about: its forward calls code it cannot read. */
    static class Leaf extends AbstractBlock {
        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            return UnknownCode.same(inputs);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return inputShapes;
        }
    }

    /** A composite whose forward pass djl-amp cannot see: an opaque composite. */
    static class Composite extends Leaf {
        Composite(Block... children) {
            for (Block child : children) {
                addChildBlock(child.getClass().getSimpleName(), child);
            }
        }
    }

    /** A composite adding a child under a name holding the path separator and an escape. */
    static class OddlyNamed extends Leaf {
        OddlyNamed(String childName, Block child) {
            addChildBlock(childName, child);
        }
    }

    /** A user subclass of Linear. */
    static class MyLinear extends Linear {
        MyLinear() {
            super(Linear.builder().setUnits(4));
        }
    }

    /** A subclass of MyLinear, to test the most specific class override. */
    static final class MyFinerLinear extends MyLinear {}

    /** A subclass of SequentialBlock that changes how children run. */
    static final class MySequential extends SequentialBlock {
        @Override
        protected NDList forwardInternal(
                ParameterStore parameterStore,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            return super.forwardInternal(parameterStore, inputs, training, params);
        }
    }

    /** A subclass of SequentialBlock that keeps its forward, like model-zoo's Mlp. */
    static final class NamedSequential extends SequentialBlock {}

    /**
     * Builds the tree used by several tests (path, class):
     *
     * <pre>
     * ""                        SequentialBlock
     * 01Linear                  Linear
     * 02BatchNorm               BatchNorm
     * 03LambdaBlock             ReLU lambda
     * 04SequentialBlock         SequentialBlock
     * 04SequentialBlock/01Linear      Linear
     * 04SequentialBlock/02LayerNorm   LayerNorm
     * 05Composite               opaque composite
     * 05Composite/01Linear      Linear (inside a unit)
     * </pre>
     */
    static SequentialBlock tree() {
        SequentialBlock inner =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(8).build())
                        .add(LayerNorm.builder().build());
        return new SequentialBlock()
                .add(Linear.builder().setUnits(8).build())
                .add(BatchNorm.builder().build())
                .add(new LambdaBlock(ai.djl.nn.Activation::relu, "ReLU"))
                .add(inner)
                .add(new Composite(Linear.builder().setUnits(2).build()));
    }

    /**
     * The shape of d2l-java's Residual (its resnet notebook): two convolution paths in a
     * ParallelBlock, joined by add and relu, its forward handing its input to that block.
     */
    static final class D2lResidual extends AbstractBlock {
        final ParallelBlock block;

        D2lResidual(int channels) {
            SequentialBlock b1 =
                    new SequentialBlock()
                            .add(
                                    Conv2d.builder()
                                            .setFilters(channels)
                                            .setKernelShape(new Shape(3, 3))
                                            .optPadding(new Shape(1, 1))
                                            .build())
                            .add(BatchNorm.builder().build())
                            .add(Activation::relu)
                            .add(
                                    Conv2d.builder()
                                            .setFilters(channels)
                                            .setKernelShape(new Shape(3, 3))
                                            .optPadding(new Shape(1, 1))
                                            .build())
                            .add(BatchNorm.builder().build());
            SequentialBlock conv1x1 = new SequentialBlock().add(Blocks.identityBlock());
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
                                    Arrays.asList(b1, conv1x1)));
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
            return inputs;
        }
    }
}
