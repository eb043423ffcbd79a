package io.github.djlamp.bench.train;

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
import java.util.Arrays;

/**
 * ResNet-18 as d2l-java's chapter 7.6 builds it: a 7x7 stem, max pooling, four stages of two
 * residual units and a linear head, each unit a block of the user's own whose forward hands its
 * input to a ParallelBlock joined by a lambda (add, then relu), every activation {@code
 * Activation::relu}. djl-amp runs each unit as one 16-bit stage and reads its code to compile it.
 */
final class D2lResNet {

    private D2lResNet() {}

    /**
     * Builds the network.
     *
     * @param classes the number of classes
     * @return the network, not initialized
     */
    static SequentialBlock build(int classes) {
        SequentialBlock net =
                new SequentialBlock()
                        .add(
                                Conv2d.builder()
                                        .setKernelShape(new Shape(7, 7))
                                        .optStride(new Shape(2, 2))
                                        .optPadding(new Shape(3, 3))
                                        .setFilters(64)
                                        .build())
                        .add(BatchNorm.builder().build())
                        .add(Activation::relu)
                        .add(
                                Pool.maxPool2dBlock(
                                        new Shape(3, 3), new Shape(2, 2), new Shape(1, 1)));
        int[] channels = {64, 128, 256, 512};
        for (int stage = 0; stage < channels.length; stage++) {
            SequentialBlock units = new SequentialBlock();
            for (int i = 0; i < 2; i++) {
                boolean downsample = i == 0 && stage > 0;
                units.add(
                        new Residual(
                                channels[stage],
                                downsample,
                                downsample ? new Shape(2, 2) : new Shape(1, 1)));
            }
            net.add(units);
        }
        return net.add(Pool.globalAvgPool2dBlock()).add(Linear.builder().setUnits(classes).build());
    }

    /** d2l-java's residual unit: its two branches in a ParallelBlock, joined by add and relu. */
    static final class Residual extends AbstractBlock {

        private final ParallelBlock block;

        Residual(int channels, boolean project, Shape stride) {
            SequentialBlock body =
                    new SequentialBlock()
                            .add(convolution(channels, 3, stride))
                            .add(BatchNorm.builder().build())
                            .add(Activation::relu)
                            .add(convolution(channels, 3, new Shape(1, 1)))
                            .add(BatchNorm.builder().build());
            SequentialBlock shortcut =
                    new SequentialBlock()
                            .add(
                                    project
                                            ? convolution(channels, 1, stride)
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

        private static Block convolution(int channels, int kernel, Shape stride) {
            return Conv2d.builder()
                    .setFilters(channels)
                    .setKernelShape(new Shape(kernel, kernel))
                    .optPadding(new Shape(kernel / 2, kernel / 2))
                    .optStride(stride)
                    .build();
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
}
