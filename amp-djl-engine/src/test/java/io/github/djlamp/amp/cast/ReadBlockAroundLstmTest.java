package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.core.Linear;
import ai.djl.nn.recurrent.LSTM;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.strategy.AutocastStage;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.Precision;
import org.junit.jupiter.api.Test;

/**
 * d2l-java's {@code RNNModel} shape: a block of the user's own that rewrites its input list in
 * place (batch-major to time-major), then runs DJL's LSTM and a linear head. djl-amp reads its
 * forward and runs it under the engine's autocast. Where the engine refuses a 16-bit LSTM (oneDNN
 * on a CPU without bf16 instructions) the stage runs it again in fp32: that second run used to see
 * the list the first had rewritten, transposed it twice and trained on the wrong axis, silently.
 */
class ReadBlockAroundLstmTest {

    static final class TimeMajorLstm extends AbstractBlock {
        private final Block rnn;
        private final Block dense;

        TimeMajorLstm() {
            rnn = addChildBlock("rnn", LSTM.builder().setNumLayers(1).setStateSize(8).build());
            dense = addChildBlock("dense", Linear.builder().setUnits(2).build());
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList inputs, boolean training, PairList<String, Object> p) {
            inputs.set(0, inputs.get(0).transpose(1, 0, 2));
            NDArray y = rnn.forward(store, inputs, training).head();
            return dense.forward(store, new NDList(y.reshape(-1, 8)), training);
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            Shape timeMajor =
                    new Shape(inputShapes[0].get(1), inputShapes[0].get(0), inputShapes[0].get(2));
            rnn.initialize(manager, dataType, timeMajor);
            dense.initialize(manager, dataType, new Shape(1, 8));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return new Shape[] {new Shape(inputShapes[0].get(0) * inputShapes[0].get(1), 2)};
        }
    }

    @Test
    void theEnginesAutocastRunsItOrItsFp32RunSeesTheInputAsGiven() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(5);
            TimeMajorLstm model = new TimeMajorLstm();
            Shape input = new Shape(4, 3, 5);
            model.initialize(manager, DataType.FLOAT32, input);
            NDArray x = manager.randomNormal(input);
            ParameterStore store = new ParameterStore(manager, false);
            float[] fp32 = model.forward(store, new NDList(x), false).head().toFloatArray();

            MixedPrecisionBlock wrapped = Amp.wrap(model, "mixed_bfloat16");
            float[] low = wrapped.forward(store, new NDList(x), true).head().toFloatArray();
            AutocastStage stage = (AutocastStage) wrapped.shadowOn(manager.getDevice(), manager);
            assertNotNull(stage);
            System.out.println(
                    "user block around an LSTM: "
                            + (stage.fallbackReason() == null
                                    ? "bf16 under autocast"
                                    : "fp32 after the engine refused: " + stage.fallbackReason()));
            // the summary says what ran (it said bf16 after the engine's refusal)
            PrecisionSummary.Row row =
                    wrapped.getPrecisionSummary(manager.getDevice(), manager).getRows().get(0);
            System.out.println("its summary row: " + row.getCategory() + ", " + row.getReason());
            if (stage.fallbackReason() != null) {
                assertEquals(CastCategory.FP32, row.getCategory());
                assertTrue(row.getReason().contains(stage.fallbackReason()), row.getReason());
                assertArrayEquals(fp32, low, 0f, "the fp32 run is plain DJL's, bitwise");
            } else {
                assertEquals(CastCategory.LOW, row.getCategory());
                assertEquals(Precision.BF16, stage.lastComputedPrecision());
                assertEquals(fp32.length, low.length);
                for (int i = 0; i < fp32.length; i++) {
                    assertTrue(Math.abs(fp32[i] - low[i]) < 0.05 + 0.05 * Math.abs(fp32[i]));
                }
            }
            for (Pair<String, ai.djl.nn.Parameter> p : model.getParameters()) {
                assertEquals(DataType.FLOAT32, p.getValue().getArray().getDataType());
            }
        }
    }
}
