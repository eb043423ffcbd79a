package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.ParameterList;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * d2l-java's training loops take the network as an {@code Object} and call {@code ((AbstractBlock)
 * net).forward(new ParameterStore(manager, false), x, true)} and {@code ((AbstractBlock)
 * net).getParameters()} (its chapter 9 {@code trainCh8} and gradient clipping). A wrapped block
 * passed there used to fail with a {@link ClassCastException}; it is an {@code AbstractBlock} that
 * computes in 16 bits through that call, as through {@link Block}'s.
 */
class AbstractBlockLoopTest {

    private static Block network() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(32).build())
                .add(Activation::relu)
                .add(Linear.builder().setUnits(4).build());
    }

    @Test
    void aWrappedBlockTrainsThroughD2lsAbstractBlockCall() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(7);
            Block block = network();
            block.initialize(manager, DataType.FLOAT32, new Shape(8, 16));
            Object net = Amp.wrap(block, "mixed_bfloat16");
            assertTrue(net instanceof AbstractBlock, "d2l casts the network to AbstractBlock");

            List<float[]> viaAbstractBlock = step((AbstractBlock) net, manager);
            List<float[]> viaBlock = step((Block) net, manager);
            assertEquals(viaBlock.size(), viaAbstractBlock.size());
            for (int i = 0; i < viaBlock.size(); i++) {
                assertArrayEquals(viaBlock.get(i), viaAbstractBlock.get(i), "array " + i);
            }
            MixedPrecisionBlock wrapped = (MixedPrecisionBlock) net;
            assertEquals(
                    1.0,
                    wrapped.getArithmeticShare(manager.getDevice()).getLowShare(),
                    "both linear layers in bfloat16: "
                            + wrapped.getArithmeticShare(manager.getDevice()));

            // d2l's gradient clipping reads the parameters through the same cast
            ParameterList seen = ((AbstractBlock) net).getParameters();
            ParameterList original = block.getParameters();
            assertEquals(original.size(), seen.size());
            for (int i = 0; i < original.size(); i++) {
                assertSame(original.get(i).getValue(), seen.get(i).getValue());
            }
        }
    }

    /** One step as d2l's trainEpochCh8 runs it: the output and every fp32 master's gradient. */
    private static List<float[]> step(Block net, NDManager manager) {
        List<float[]> result = new ArrayList<>();
        try (NDManager batch = manager.newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            NDArray x =
                    batch.arange(8f * 16).reshape(8, 16).div(batch.full(new Shape(), 50f)).sin();
            NDList output = net.forward(new ParameterStore(manager, false), new NDList(x), true);
            assertEquals(DataType.FLOAT32, output.head().getDataType(), "outputs come back fp32");
            collector.backward(output.head().sum());
            result.add(output.head().toFloatArray());
        }
        for (Pair<String, Parameter> p : net.getParameters()) {
            NDArray gradient = p.getValue().getArray().getGradient();
            assertEquals(DataType.FLOAT32, gradient.getDataType());
            result.add(gradient.toFloatArray());
            gradient.subi(gradient); // DJL never zeroes gradients
        }
        return result;
    }
}
