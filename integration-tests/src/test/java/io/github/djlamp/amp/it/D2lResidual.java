package io.github.djlamp.amp.it;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.pooling.Pool;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;

/**
 * A residual unit as d2l-java writes one (a block with its own forward: relu(bn1(conv1 x)), then
 * bn2(conv2 ...), plus x or its 1x1 projection, relu), and a small network of them behind a stem
 * whose ReLU is {@code Activation::relu}: a user's program off the model zoo's path.
 */
final class D2lResidual extends AbstractBlock {

    private final Conv2d conv1;
    private final Conv2d conv2;
    private final Conv2d conv3;
    private final BatchNorm bn1;
    private final BatchNorm bn2;

    D2lResidual(int channels, boolean use1x1Conv, Shape stride) {
        super((byte) 2);
        conv1 =
                addChildBlock(
                        "conv1",
                        Conv2d.builder()
                                .setFilters(channels)
                                .setKernelShape(new Shape(3, 3))
                                .optPadding(new Shape(1, 1))
                                .optStride(stride)
                                .build());
        conv2 =
                addChildBlock(
                        "conv2",
                        Conv2d.builder()
                                .setFilters(channels)
                                .setKernelShape(new Shape(3, 3))
                                .optPadding(new Shape(1, 1))
                                .build());
        conv3 =
                use1x1Conv
                        ? addChildBlock(
                                "conv3",
                                Conv2d.builder()
                                        .setFilters(channels)
                                        .setKernelShape(new Shape(1, 1))
                                        .optStride(stride)
                                        .build())
                        : null;
        bn1 = addChildBlock("bn1", BatchNorm.builder().build());
        bn2 = addChildBlock("bn2", BatchNorm.builder().build());
    }

    @Override
    protected NDList forwardInternal(
            ParameterStore store, NDList x, boolean training, PairList<String, Object> params) {
        NDList y = conv1.forward(store, x, training);
        y = bn1.forward(store, y, training);
        y = new NDList(Activation.relu(y.head()));
        y = conv2.forward(store, y, training);
        y = bn2.forward(store, y, training);
        NDArray shortcut = conv3 == null ? x.head() : conv3.forward(store, x, training).head();
        return new NDList(Activation.relu(y.head().add(shortcut)));
    }

    @Override
    public Shape[] getOutputShapes(Shape[] inputs) {
        Shape[] current = inputs;
        for (Block layer : new Block[] {conv1, bn1, conv2, bn2}) {
            current = layer.getOutputShapes(current);
        }
        return current;
    }

    @Override
    protected void initializeChildBlocks(
            NDManager manager, DataType dataType, Shape... inputShapes) {
        Shape[] shapes = inputShapes;
        for (Block layer : new Block[] {conv1, bn1, conv2, bn2}) {
            layer.initialize(manager, dataType, shapes);
            shapes = layer.getOutputShapes(shapes);
        }
        if (conv3 != null) {
            conv3.initialize(manager, dataType, inputShapes);
        }
    }

    /**
     * A stem (convolution, BatchNorm, {@code Activation::relu}), two residual units (the second
     * with a strided 1x1 projection), global pooling and a linear head: 7 stages.
     */
    static Block network(int channels, int classes) {
        return new SequentialBlock()
                .add(
                        Conv2d.builder()
                                .setFilters(channels)
                                .setKernelShape(new Shape(3, 3))
                                .optPadding(new Shape(1, 1))
                                .build())
                .add(BatchNorm.builder().build())
                .add(Activation::relu)
                .add(new D2lResidual(channels, false, new Shape(1, 1)))
                .add(new D2lResidual(channels, true, new Shape(2, 2)))
                .add(Pool.globalAvgPool2dBlock())
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(classes).build());
    }
}
