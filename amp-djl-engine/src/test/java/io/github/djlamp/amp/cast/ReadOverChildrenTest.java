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
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.Parameter;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.policy.BlockPlan;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A block whose forward djl-amp reads as safe, holding a child that is not safe in 16 bits (a
 * lambda that calls softmax), runs its own code over its children, each in its own precision: its
 * convolutions compute in bf16 and the lambda in fp32. Before, the whole block ran in fp32, as
 * DJL's YOLOv3 did (its upsampling lambdas), at 0% of its arithmetic in 16 bits.
 */
class ReadOverChildrenTest {

    /** Two convolutions around a softmax gate, their outputs joined on {@code axis}. */
    static final class GatedPair extends AbstractBlock {
        private final Block first;
        private final Block gate;
        private final Block second;
        private int axis = 1;

        GatedPair() {
            first = addChildBlock("first", conv(4));
            gate = addChildBlock("gate", new LambdaBlock(x -> new NDList(x.head().softmax(1))));
            second = addChildBlock("second", conv(4));
        }

        private static Block conv(int filters) {
            return Conv2d.builder()
                    .setFilters(filters)
                    .setKernelShape(new Shape(3, 3))
                    .optPadding(new Shape(1, 1))
                    .build();
        }

        void setAxis(int axis) {
            this.axis = axis;
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore parameterStore,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            NDArray a = first.forward(parameterStore, inputs, training).singletonOrThrow();
            NDArray g = gate.forward(parameterStore, new NDList(a), training).singletonOrThrow();
            NDArray b =
                    second.forward(parameterStore, new NDList(a.mul(g)), training)
                            .singletonOrThrow();
            return new NDList(a.concat(b, axis));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            Shape a = first.getOutputShapes(inputShapes)[0];
            long[] dims = a.getShape();
            dims[axis] *= 2;
            return new Shape[] {new Shape(dims)};
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            first.initialize(manager, dataType, inputShapes);
            Shape[] a = first.getOutputShapes(inputShapes);
            gate.initialize(manager, dataType, a);
            second.initialize(manager, dataType, a);
        }
    }

    @Test
    void itsConvolutionsComputeInBf16AndTheSoftmaxLambdaInFp32() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(11);
            GatedPair block = new GatedPair();
            block.initialize(manager, DataType.FLOAT32, new Shape(2, 3, 6, 6));
            ModelPlan plan =
                    ModelPlan.of(PrecisionPolicy.parse("mixed_bfloat16"), block, b -> false);
            assertEquals(BlockPlan.Strategy.READ, plan.get("").getStrategy(), plan.toString());
            assertEquals("FP32", plan.get("02gate").getCategory().name());
            assertEquals("LOW", plan.get("01first").getCategory().name());

            List<float[]> fp32 = step(block, block, manager);
            MixedPrecisionBlock wrapped = Amp.wrap(block, "mixed_bfloat16");
            List<float[]> bf16 = step(wrapped, block, manager);
            ArithmeticShare share = wrapped.getArithmeticShare(manager.getDevice());
            assertEquals(1.0, share.getLowShare(), 1e-9, "both convolutions: " + share);
            assertEquals(fp32.size(), bf16.size());
            for (int i = 0; i < fp32.size(); i++) {
                double error = Fp32Distance.of(fp32.get(i), bf16.get(i));
                assertTrue(error < 0.05, "array " + i + ": " + error);
            }
        }
    }

    @Test
    void underFloat32ItIsBitwisePlainDjlAndReadsItsFieldsAsTheyAreAtEachForward() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(12);
            GatedPair block = new GatedPair();
            block.initialize(manager, DataType.FLOAT32, new Shape(2, 3, 6, 6));
            MixedPrecisionBlock wrapped = Amp.wrap(block, "float32");
            for (int axis : new int[] {1, 2, 3}) {
                block.setAxis(axis);
                List<float[]> plain = step(block, block, manager);
                List<float[]> fp32 = step(wrapped, block, manager);
                assertEquals(plain.size(), fp32.size());
                for (int i = 0; i < plain.size(); i++) {
                    assertArrayEquals(plain.get(i), fp32.get(i), "axis " + axis + ", array " + i);
                }
            }
        }
    }

    /** The output (with its shape's length first) and every weight's gradient of one step. */
    private static List<float[]> step(Block block, Block original, NDManager manager) {
        List<float[]> result = new ArrayList<>();
        try (NDManager batch = manager.newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            NDArray x =
                    batch.arange(2f * 3 * 6 * 6)
                            .reshape(2, 3, 6, 6)
                            .div(batch.full(new Shape(), 30f))
                            .sin();
            NDList out = block.forward(new ParameterStore(manager, false), new NDList(x), true);
            NDArray y = out.head().toType(DataType.FLOAT32, false);
            collector.backward(out.head().square().sum());
            result.add(new float[] {y.getShape().get(1), y.getShape().get(2), y.getShape().get(3)});
            result.add(y.toFloatArray());
        }
        for (Pair<String, Parameter> p : original.getParameters()) {
            NDArray array = p.getValue().getArray();
            if (array.hasGradient()) {
                NDArray gradient = array.getGradient();
                result.add(gradient.toFloatArray());
                gradient.subi(gradient); // DJL never zeroes gradients
            }
        }
        return result;
    }
}
