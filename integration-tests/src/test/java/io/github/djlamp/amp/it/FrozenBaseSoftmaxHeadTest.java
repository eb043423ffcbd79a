package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import java.util.Arrays;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * DJL's {@code TransferFreshFruit} fine-tunes a two-class softmax head on a frozen base. DJL's
 * trainer checks at the first step that backward reached the parameters by adding up every gradient
 * with its sign, and the gradients of a softmax head sum to zero over its classes: in 16 bits, for
 * two classes, exactly zero. The example then stopped at its first step with "Gradient values are
 * all zeros", though every gradient was right. djl-amp makes that check itself, by magnitude.
 */
class FrozenBaseSoftmaxHeadTest {

    private static final int BATCH = 8;

    @Test
    void aFrozenBaseWithATwoClassSoftmaxHeadTrainsInBf16() throws Exception {
        float[][] weights = trainHead("mixed_bfloat16", FusedOptimizer.AUTO, null);
        assertFalse(Arrays.equals(weights[0], weights[1]), "the head's weights moved");
    }

    @Test
    void aFrozenBaseWithATwoClassSoftmaxHeadTrainsInFp16WithFusedSteps() throws Exception {
        float[][] weights = trainHead("mixed_float16", FusedOptimizer.ON, null);
        assertFalse(Arrays.equals(weights[0], weights[1]), "the head's weights moved");
    }

    @Test
    void gradientsThatAreAllZeroStillStopTheFirstStepWithDjlsMessage() {
        // a loss that does not depend on the prediction: backward reaches no parameter
        Function<NDList, NDArray> constant = predictions -> predictions.head().mul(0f).sum();
        IllegalStateException e =
                assertThrows(
                        IllegalStateException.class,
                        () -> trainHead("mixed_bfloat16", FusedOptimizer.AUTO, constant));
        assertTrue(e.getMessage().startsWith("Gradient values are all zeros"), e.getMessage());
    }

    /**
     * One epoch of two steps under TransferFreshFruit's loss or, when given, a function of the
     * predictions alone; returns the head's weights before and after.
     */
    private static float[][] trainHead(
            String policy, FusedOptimizer fused, Function<NDList, NDArray> lossOverride)
            throws Exception {
        Engine.getInstance().setRandomSeed(5);
        Linear base = Linear.builder().setUnits(16).build();
        Linear head = Linear.builder().setUnits(2).build();
        SequentialBlock block =
                new SequentialBlock()
                        .add(base)
                        .add(Activation.reluBlock())
                        .add(head)
                        .addSingleton(x -> x.softmax(1));
        try (Model model = Model.newInstance("fresh-fruit", "PyTorch");
                NDManager manager = NDManager.newBaseManager()) {
            MixedPrecisionBlock wrapped = Amp.wrap(block, policy);
            model.setBlock(wrapped);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(new PredictionLoss(lossOverride))
                            .optOptimizer(Optimizer.adam().build());
            try (Trainer trainer =
                    model.newTrainer(
                            Amp.configure(
                                    config,
                                    wrapped,
                                    AmpOptions.builder().fusedOptimizer(fused).build()))) {
                trainer.initialize(new Shape(BATCH, 8));
                base.freezeParameters(true);
                NDArray x = manager.randomNormal(new Shape(2L * BATCH, 8));
                NDArray classes =
                        manager.randomInteger(0, 2, new Shape(2L * BATCH), DataType.INT32);
                NDArray y = classes.oneHot(2).toType(DataType.FLOAT32, false);
                ArrayDataset data =
                        new ArrayDataset.Builder()
                                .setData(x)
                                .optLabels(y)
                                .setSampling(BATCH, false)
                                .build();
                float[] before = head.getParameters().get("weight").getArray().toFloatArray();
                EasyTrain.fit(trainer, 1, data, null);
                float[] after = head.getParameters().get("weight").getArray().toFloatArray();
                return new float[][] {before, after};
            }
        }
    }

    /** TransferFreshFruit's loss, or the given function of the predictions alone. */
    private static final class PredictionLoss extends Loss {
        private final Function<NDList, NDArray> override;

        PredictionLoss(Function<NDList, NDArray> override) {
            super("SoftmaxCrossEntropy");
            this.override = override;
        }

        @Override
        public NDArray evaluate(NDList labels, NDList predictions) {
            if (override != null) {
                return override.apply(predictions);
            }
            NDArray prediction = predictions.singletonOrThrow().log();
            NDArray label = labels.singletonOrThrow().reshape(prediction.getShape());
            return prediction.mul(label).neg().sum(new int[] {-1}, true).mean();
        }
    }
}
