package io.github.djlamp.bench.train;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.pooling.Pool;

/**
 * A convolutional network written as d2l-java's chapters write them (its VGG blocks with the batch
 * normalization of its chapter 7.5): every activation a method reference, {@code
 * .add(Activation::relu)}, the form issue 29 measured at 0.79x fp32's step in bf16 when each ReLU
 * was an fp32 island. In a class of its own, as a notebook cell would be: it writes no other
 * lambda.
 */
final class D2lCnn {

    private D2lCnn() {}

    /**
     * Builds three VGG blocks of two 3x3 convolutions (32, 64 and 128 channels, each followed by
     * BatchNorm and {@code Activation::relu}) and a max-pooling each, then a flatten, {@code
     * Linear(256)}, {@code Activation::relu}, {@code Dropout(0.5)} and a linear classifier.
     *
     * @param classes the number of classes
     * @return the network, not initialized
     */
    static SequentialBlock build(int classes) {
        SequentialBlock net = new SequentialBlock();
        for (int channels : new int[] {32, 64, 128}) {
            net.add(vggBlock(channels));
        }
        return net.add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(256).build())
                .add(Activation::relu)
                .add(Dropout.builder().optRate(0.5f).build())
                .add(Linear.builder().setUnits(classes).build());
    }

    private static SequentialBlock vggBlock(int channels) {
        SequentialBlock block = new SequentialBlock();
        for (int i = 0; i < 2; i++) {
            block.add(
                            Conv2d.builder()
                                    .setKernelShape(new Shape(3, 3))
                                    .optPadding(new Shape(1, 1))
                                    .setFilters(channels)
                                    .build())
                    .add(BatchNorm.builder().build())
                    .add(Activation::relu);
        }
        return block.add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)));
    }
}
