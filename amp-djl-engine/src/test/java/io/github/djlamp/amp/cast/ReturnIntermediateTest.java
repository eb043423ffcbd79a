package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.Amp;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A SequentialBlock set to return every child's output ({@code setReturnIntermediate(true)}, as
 * DJL's YOLOv3 backbone is) returns them all through the wrapper too: the shadow returned the last
 * output only, so a model reading an earlier one got another array or an index error.
 */
class ReturnIntermediateTest {

    @Test
    void everyChildsOutputIsReturnedBitwiseInFloat32AndCloseInBf16() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(5);
            SequentialBlock net = new SequentialBlock();
            net.add(Linear.builder().setUnits(6).build())
                    .add(Activation.reluBlock())
                    .add(Linear.builder().setUnits(3).build());
            net.setReturnIntermediate(true);
            net.initialize(manager, DataType.FLOAT32, new Shape(2, 4));

            List<float[]> plain = forwardAndBackward(net, net, manager);
            assertEquals(3 + 2, plain.size(), "three outputs and two weight gradients");

            List<float[]> fp32 = forwardAndBackward(Amp.wrap(net, "float32"), net, manager);
            assertEquals(plain.size(), fp32.size(), "outputs of the float32 wrapper");
            for (int i = 0; i < plain.size(); i++) {
                assertArrayEquals(plain.get(i), fp32.get(i), "array " + i);
            }

            List<float[]> bf16 = forwardAndBackward(Amp.wrap(net, "mixed_bfloat16"), net, manager);
            assertEquals(plain.size(), bf16.size(), "outputs of the bf16 wrapper");
            for (int i = 0; i < plain.size(); i++) {
                assertEquals(plain.get(i).length, bf16.get(i).length, "array " + i);
                for (int j = 0; j < plain.get(i).length; j++) {
                    float expected = plain.get(i)[j];
                    assertTrue(
                            Math.abs(bf16.get(i)[j] - expected) <= 0.02 * Math.abs(expected) + 0.02,
                            "array " + i + " [" + j + "]: " + bf16.get(i)[j] + " vs " + expected);
                }
            }
        }
    }

    /** Every output of a training forward, then the weights' gradients of a loss over all. */
    private static List<float[]> forwardAndBackward(Block block, Block net, NDManager manager) {
        List<float[]> result = new ArrayList<>();
        try (NDManager batch = manager.newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            NDArray x = batch.arange(8f).reshape(2, 4).div(batch.full(new Shape(), 8f)).sin();
            NDList out = block.forward(new ParameterStore(manager, false), new NDList(x), true);
            NDArray loss = null;
            for (NDArray o : out) {
                result.add(o.toType(DataType.FLOAT32, false).toFloatArray());
                NDArray term = o.square().sum();
                loss = loss == null ? term : loss.add(term);
            }
            collector.backward(loss);
        }
        for (var p : net.getParameters()) {
            NDArray array = p.getValue().getArray();
            if (p.getKey().endsWith("weight")) {
                result.add(array.getGradient().toFloatArray());
            }
            array.getGradient().subi(array.getGradient()); // DJL never zeroes gradients
        }
        return result;
    }
}
