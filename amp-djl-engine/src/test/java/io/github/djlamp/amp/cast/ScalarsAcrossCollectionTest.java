package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.Amp;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * DJL's ReLU6 and Swish make their number (6, beta) over a Java buffer that a garbage collection
 * may free while backward still reads it (see {@link GcSafeLambdas}). A forward of the wrapper, a
 * collection that frees such buffers and allocations that reuse their memory, then backward: every
 * gradient is plain DJL's, computed with no collection in between. Eager stages and the compiled
 * run's first (eager) forward alike.
 */
class ScalarsAcrossCollectionTest {

    private static final Shape INPUT = new Shape(2, 3, 8, 8);

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void gradientsAreDjlsWhateverACollectionFreesBeforeBackward(boolean compile)
            throws InterruptedException {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block plain = network();
            NDArray x = initialize(plain, manager);
            List<float[]> expected = step(plain, x, false);
            Block block = network();
            initialize(block, manager);
            List<float[]> actual =
                    step(Amp.wrap(block, "float32").compileForward(compile), x, true);
            assertEquals(expected.size(), actual.size());
            for (int i = 0; i < expected.size(); i++) {
                assertArrayEquals(expected.get(i), actual.get(i), 0f, "gradient " + i);
            }
        }
    }

    private static Block network() {
        return new SequentialBlock()
                .add(Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(8).build())
                .add(Activation.relu6Block())
                .add(Conv2d.builder().setKernelShape(new Shape(1, 1)).setFilters(4).build())
                .add(Activation::relu6)
                .add(Activation.swishBlock(1.5f))
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(5).build());
    }

    /** Inputs 20 times a standard normal's, so that ReLU6 clips many values at 6. */
    private static NDArray initialize(Block block, NDManager manager) {
        Engine.getInstance().setRandomSeed(9);
        block.initialize(manager, DataType.FLOAT32, INPUT);
        return manager.randomNormal(INPUT).mul(20f);
    }

    private static List<float[]> step(Block block, NDArray x, boolean collect)
            throws InterruptedException {
        List<float[]> gradients = new ArrayList<>();
        try (NDManager step = x.getManager().newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            NDArray out =
                    block.forward(new ParameterStore(step, false), new NDList(x), true)
                            .singletonOrThrow();
            if (collect) {
                reuseFreedBuffers();
            }
            collector.backward(out.sum());
            block.getParameters()
                    .forEach(
                            p ->
                                    gradients.add(
                                            p.getValue().getArray().getGradient().toFloatArray()));
        }
        return gradients;
    }

    /**
     * Frees what no Java reference holds (a direct buffer's memory goes back to malloc once its
     * cleaner has run), then takes small blocks of zeros, which reuse that memory.
     */
    private static void reuseFreedBuffers() throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(50);
        }
        List<ByteBuffer> zeros = new ArrayList<>();
        for (int i = 0; i < 4096; i++) {
            zeros.add(ByteBuffer.allocateDirect(4).putInt(0, 0));
        }
        zeros.clear();
    }
}
