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
