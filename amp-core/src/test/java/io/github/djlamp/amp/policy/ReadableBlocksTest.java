package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.recurrent.LSTM;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import org.junit.jupiter.api.Test;

/**
 * A block of the user's own class computes in 16 bits without anyone vouching for it when djl-amp
 * can read its forward as safe on bf16 arrays and every child is safe in 16 bits on its own rules.
 * d2l-java's {@code Residual} (its resnet chapter) forwards to the ParallelBlock it holds: it
 * computed 0.1% of its arithmetic in bf16 unless its class was trusted.
 */
class ReadableBlocksTest {

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

    /** A hand-written product after its child: a 16-bit matMul the kernel check would not see. */
    static final class ProductAfterChild extends AbstractBlock {
        final Block inner = addChildBlock("inner", Linear.builder().setUnits(2).build());

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            NDArray h = inner.forward(store, inputs, training).head();
            return new NDList(h.matMul(h.transpose()));
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
        TestBlocks.D2lResidual residual = new TestBlocks.D2lResidual(4);
        assertTrue(ReadableBlocks.isReadable(residual));
        assertEquals(CastCategory.LOW, DefaultCastRules.categoryOf(residual));
        assertTrue(
                DefaultCastRules.reasonFor(residual)
                        .startsWith("a block whose forward djl-amp read: it calls"),
                DefaultCastRules.reasonFor(residual));
        assertTrue(DefaultCastRules.knowsSafeIn16Bits(residual), "on nobody's word");
        SequentialBlock net =
                new SequentialBlock().add(residual).add(new TestBlocks.D2lResidual(4));
        ModelPlan plan = ModelPlan.of(PrecisionPolicy.parse("mixed_bfloat16"), net, b -> false);
        BlockPlan first = plan.get("01D2lResidual");
        assertEquals(CastCategory.LOW, first.getCategory());
        assertEquals(null, first.getBf16Hazard());
        assertTrue(first.getVouchedFor().isEmpty(), "nobody vouches: " + first.getVouchedFor());
    }

    /** d2l-java's DenseBlock: its children listed again in a SequentialBlock it iterates. */
    static class ViewOfChildren extends AbstractBlock {
        final SequentialBlock net;

        ViewOfChildren(SequentialBlock view, Block... children) {
            net = view;
            int i = 0;
            for (Block child : children) {
                net.add(addChildBlock("c" + i++, child));
            }
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            NDList x = inputs;
            for (Block block : net.getChildren().values()) {
                x = block.forward(store, x, training);
            }
            return x;
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return inputs;
        }
    }

    /** A SequentialBlock of another class may run other code when listed. */
    static final class OtherSequential extends SequentialBlock {}

    @Test
    void aViewOfItsChildrenIsReadOnlyWhenItListsThemAndIsDjlsSequentialBlock() {
        ViewOfChildren dense =
                new ViewOfChildren(
                        new SequentialBlock(),
                        Linear.builder().setUnits(2).build(),
                        Linear.builder().setUnits(2).build());
        assertEquals(null, ReadableBlocks.whyNot(dense));
        assertEquals(CastCategory.LOW, DefaultCastRules.categoryOf(dense));

        ViewOfChildren subclass =
                new ViewOfChildren(new OtherSequential(), Linear.builder().setUnits(2).build());
        assertEquals(CastCategory.FP32, DefaultCastRules.categoryOf(subclass), "a subclass");

        ViewOfChildren stranger =
                new ViewOfChildren(new SequentialBlock(), Linear.builder().setUnits(2).build());
        stranger.net.add(Linear.builder().setUnits(2).build()); // listed, never registered
        assertEquals(CastCategory.FP32, DefaultCastRules.categoryOf(stranger), "a stranger");

        // with a child not safe in 16 bits, a block read through a view is not copied over its
        // children's shadows (the view would still list the children): it stays fp32
        ViewOfChildren aroundLambda =
                new ViewOfChildren(
                        new SequentialBlock(),
                        Linear.builder().setUnits(2).build(),
                        new LambdaBlock(UnknownCode::same));
        assertEquals(CastCategory.FP32, DefaultCastRules.categoryOf(aroundLambda));
    }

    @Test
    void aBlockWhoseCodeMayNotSee16BitArraysStaysFp32() {
        for (Block block :
                new Block[] {
                    new SoftmaxAfterChild(),
                    new HiddenBlock(),
                    new OwnForward(),
                    new ProductAfterChild()
                }) {
            assertEquals(
                    CastCategory.FP32,
                    DefaultCastRules.categoryOf(block),
                    block.getClass().getSimpleName());
        }
    }

    @Test
    void aReadableBlockWithAChildNotSafeIn16BitsRunsItsCodeOverItsChildren() {
        AroundLstm block = new AroundLstm();
        assertEquals(CastCategory.CONTAINER, DefaultCastRules.categoryOf(block));
        assertTrue(DefaultCastRules.isReadOverChildren(block));
        ModelPlan plan = ModelPlan.of(PrecisionPolicy.parse("mixed_bfloat16"), block, b -> false);
        assertEquals(BlockPlan.Strategy.READ, plan.get("").getStrategy());
        assertEquals(CastCategory.FP32, plan.get("01rnn").getCategory(), "the LSTM on its own");
        // where the engine's autocast runs the LSTM, it runs the readable block whole, as before
        ModelPlan engine =
                ModelPlan.of(
                        PrecisionPolicy.parse("mixed_bfloat16"),
                        block,
                        b -> b instanceof ai.djl.nn.recurrent.LSTM);
        assertEquals(BlockPlan.Strategy.ENGINE_AUTOCAST, engine.get("").getStrategy());
    }
}
