package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDList;
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
import ai.djl.nn.recurrent.LSTM;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * A block of the user's own class computes in 16 bits without anyone vouching for it when djl-amp
 * can read its forward as safe on bf16 arrays and every child is safe in 16 bits on its own rules.
 * d2l-java's {@code Residual} (its resnet chapter) forwards to the ParallelBlock it holds: it
 * computed 0.1% of its arithmetic in bf16 unless its class was trusted.
 */
class ReadableBlocksTest {

    /** The shape of d2l-java's Residual: two convolution paths, joined by add and relu. */
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

    /** Forwards to its child, then calls softmax: unsafe on bf16 arrays. */
    static final class SoftmaxAfterChild extends AbstractBlock {
        final Block inner = addChildBlock("inner", Linear.builder().setUnits(2).build());

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            return new NDList(inner.forward(store, inputs, training).head().softmax(1));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return inputs;
        }
    }

    /** Forwards to a block it holds but never registered: the plan cannot check that block. */
    static final class HiddenBlock extends AbstractBlock {
        final Block registered = addChildBlock("inner", Linear.builder().setUnits(2).build());
        final Block hidden = Linear.builder().setUnits(2).build();

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            return hidden.forward(store, registered.forward(store, inputs, training), training);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return inputs;
        }
    }

    /** Readable code, but a child (an LSTM on a CPU without bf16 LSTM) is not safe in bf16. */
    static final class AroundLstm extends AbstractBlock {
        final Block rnn =
                addChildBlock("rnn", LSTM.builder().setNumLayers(1).setStateSize(4).build());

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            return rnn.forward(store, inputs, training);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return inputs;
        }
    }

    /** Readable forward, but the block overrides DJL's forward around it. */
    static final class OwnForward extends AbstractBlock {
        final Block inner = addChildBlock("inner", Linear.builder().setUnits(2).build());

        @Override
        public NDList forward(ParameterStore store, NDList inputs, boolean training) {
            return UnknownCode.same(inputs);
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            return inner.forward(store, inputs, training);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return inputs;
        }
    }

    @Test
    void d2lsResidualComputesIn16BitsOnItsOwnCode() {
        D2lResidual residual = new D2lResidual(4);
        assertTrue(ReadableBlocks.isReadable(residual));
        assertEquals(CastCategory.LOW, DefaultCastRules.categoryOf(residual));
        assertTrue(
                DefaultCastRules.reasonFor(residual)
                        .startsWith("a block of your own whose forward"),
                DefaultCastRules.reasonFor(residual));
        assertTrue(DefaultCastRules.knowsSafeIn16Bits(residual), "on nobody's word");
        SequentialBlock net = new SequentialBlock().add(residual).add(new D2lResidual(4));
        ModelPlan plan = ModelPlan.of(PrecisionPolicy.parse("mixed_bfloat16"), net, b -> false);
        BlockPlan first = plan.get("01D2lResidual");
        assertEquals(CastCategory.LOW, first.getCategory());
        assertEquals(null, first.getBf16Hazard());
        assertTrue(first.getVouchedFor().isEmpty(), "nobody vouches: " + first.getVouchedFor());
    }

    @Test
    void aBlockWhoseCodeOrChildrenMayNotSee16BitArraysStaysFp32() {
        for (Block block :
                new Block[] {
                    new SoftmaxAfterChild(), new HiddenBlock(), new AroundLstm(), new OwnForward()
                }) {
            assertEquals(
                    CastCategory.FP32,
                    DefaultCastRules.categoryOf(block),
                    block.getClass().getSimpleName());
        }
    }
}
