package io.github.djlamp.amp.it;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.pooling.Pool;

/** The small models the integration tests train, built from DJL's own blocks. */
final class Models {

    private Models() {}

    /**
     * Conv2d 16 3x3, BatchNorm, ReLU, max-pool 2x2, Conv2d 32 3x3, BatchNorm, ReLU, max-pool 2x2,
     * flatten, Linear 10: for 1x28x28 images.
     */
    static SequentialBlock smallCnn() {
        return new SequentialBlock()
                .add(conv(16))
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                .add(conv(32))
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(10).build());
    }

    /**
     * A LeNet-like CNN for 1x28x28 images: Conv2d 8 5x5 padding 2 (the stem oneDNN's bf16 kernels
     * computed wrong on some machines), ReLU, max-pool 2x2, Conv2d 16 5x5, ReLU, max-pool 2x2,
     * flatten, Linear 120, ReLU, Linear 84, ReLU, Linear 10. No BatchNorm: the weights alone decide
     * what the network computes, so a model that learned a wrong kernel shows it in plain DJL.
     */
    static SequentialBlock leNet() {
        return new SequentialBlock()
                .add(conv5x5(8, 2))
                .add(Activation.reluBlock())
                .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                .add(conv5x5(16, 0))
                .add(Activation.reluBlock())
                .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(120).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(84).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(10).build());
    }

    private static Conv2d conv5x5(int filters, int pad) {
        return Conv2d.builder()
                .setKernelShape(new Shape(5, 5))
                .optPadding(new Shape(pad, pad))
                .setFilters(filters)
                .build();
    }

    /** Flatten, then Linear layers of the given widths with ReLU between them. */
    static SequentialBlock mlp(int... units) {
        SequentialBlock block = new SequentialBlock().add(Blocks.batchFlattenBlock());
        for (int i = 0; i < units.length; i++) {
            if (i > 0) {
                block.add(Activation.reluBlock());
            }
            block.add(Linear.builder().setUnits(units[i]).build());
        }
        return block;
    }

    private static Conv2d conv(int filters) {
        return Conv2d.builder()
                .setKernelShape(new Shape(3, 3))
                .optPadding(new Shape(1, 1))
                .setFilters(filters)
                .build();
    }
}
