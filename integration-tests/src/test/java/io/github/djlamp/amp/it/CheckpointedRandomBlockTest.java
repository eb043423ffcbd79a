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

    static Block network() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(8).build())
                .add(new LinearWithDropout())
                .add(Linear.builder().setUnits(3).build());
    }

    @ParameterizedTest
    @ValueSource(strings = {"float32", "mixed_bfloat16"})
    void theFirstStepIsRefusedNamingTheSegmentBeforeAnyWeightChanges(String policy) {
        Engine.getInstance().setRandomSeed(3);
        try (Model model = Model.newInstance("random-block", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(network(), policy);
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
                    assertTrue(message.contains("02LinearWithDropout"), message);
                    assertTrue(message.contains("Dropout.dropout"), message);
                    assertTrue(message.contains("Checkpointing.blocks(\"path:"), message);
                }
                assertEquals(before, Snapshots.weights(block), "no weight changed");
            }
        }
    }
}
