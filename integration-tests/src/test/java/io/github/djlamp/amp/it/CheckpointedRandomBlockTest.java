package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.Dropout;
import ai.djl.training.EasyTrain;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Checkpointing;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A block whose own forward draws random numbers ({@code Dropout.dropout}) inside a checkpointed
 * segment: its recomputation would draw a new mask, and DJL's PyTorch engine cannot save and
 * restore the generator's state for it. The first step is refused, naming the segment and the fix,
 * before any weight changes.
 */
class CheckpointedRandomBlockTest {

    /** A linear layer followed by dropout, written as a user writes it: in its own forward. */
    static final class LinearWithDropout extends AbstractBlock {
        private final Linear linear;

        LinearWithDropout() {
            linear = addChildBlock("linear", Linear.builder().setUnits(8).build());
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            NDList y = linear.forward(store, inputs, training);
            return Dropout.dropout(y.head(), 0.5f, training);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return linear.getOutputShapes(inputs);
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            linear.initialize(manager, dataType, inputShapes);
        }
    }

    /**
     * A linear layer whose output is followed by a dropped-out copy of itself along the batch axis:
     * the random values come only after the first 1.2 M of the output's 2.4 M, past the first piece
     * the recomputation's check compares.
     */
    static final class WideWithRandomTail extends AbstractBlock {
        static final int WIDTH = 300_000;
        private final Linear linear;

        WideWithRandomTail() {
            linear = addChildBlock("linear", Linear.builder().setUnits(WIDTH).build());
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            NDArray y = linear.forward(store, inputs, training).head();
            NDArray dropped = Dropout.dropout(y, 0.5f, training).head();
            return new NDList(y.concat(dropped, 0));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            Shape y = linear.getOutputShapes(inputs)[0];
            return new Shape[] {new Shape(2 * y.get(0), y.get(1))};
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            linear.initialize(manager, dataType, inputShapes);
        }
    }

    static Block network() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(8).build())
                .add(new LinearWithDropout())
                .add(Linear.builder().setUnits(3).build());
    }

    @ParameterizedTest
    @ValueSource(strings = {"float32", "mixed_bfloat16"})
    void theFirstStepIsRefusedNamingTheSegmentBeforeAnyWeightChanges(String policy) {
        refusedBeforeAnyWeightChanges(policy, network(), "02LinearWithDropout");
    }

    /** The check compares a large output piece by piece, and every piece counts. */
    @ParameterizedTest
    @ValueSource(strings = {"float32", "mixed_bfloat16"})
    void aRandomDrawPastTheFirstMillionValuesIsFound(String policy) {
        Block network =
                new SequentialBlock()
                        .add(new WideWithRandomTail())
                        .add(rows -> new NDList(rows.head().get("0:4").add(rows.head().get("4:"))))
                        .add(Linear.builder().setUnits(3).build());
        refusedBeforeAnyWeightChanges(policy, network, "01WideWithRandomTail");
    }

    private static void refusedBeforeAnyWeightChanges(
            String policy, Block network, String segment) {
        Engine.getInstance().setRandomSeed(3);
        try (Model model = Model.newInstance("random-block", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(network, policy);
            model.setBlock(block);
            try (Trainer trainer =
                    model.newTrainer(
                            Amp.configure(
                                    CheckpointingSetUp.sgd(0.1f),
                                    block,
                                    CheckpointingSetUp.options(policy, Checkpointing.stages())
                                            .build()))) {
                trainer.initialize(new Shape(4, 6));
                Map<String, Snapshots.Bits> before = Snapshots.weights(block);
                try (NDManager m = trainer.getManager().newSubManager()) {
                    NDArray x = m.arange(24f).reshape(4, 6).div(10f).sin();
                    NDArray y = m.create(new float[] {0, 1, 2, 1});
                    Batch batch = new Batch(m, new NDList(x), new NDList(y), 4, null, null, 0, 1);
                    AmpException e =
                            assertThrows(
                                    AmpException.class,
                                    () -> {
                                        EasyTrain.trainBatch(trainer, batch);
                                        trainer.step();
                                    });
                    String message = e.getMessage();
                    assertTrue(message.contains(segment), message);
                    assertTrue(message.contains("Dropout.dropout"), message);
                    assertTrue(message.contains("Checkpointing.blocks(\"path:"), message);
                }
                assertEquals(before, Snapshots.weights(block), "no weight changed");
            }
        }
    }
}
