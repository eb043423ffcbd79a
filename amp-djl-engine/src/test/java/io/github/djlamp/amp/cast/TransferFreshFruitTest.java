package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Adam;
import ai.djl.training.tracker.FixedPerVarTracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.policy.Precision;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * DJL's {@code TransferFreshFruit} in small, as its authors wrote it: a frozen TorchScript module
 * (here the committed traced CNN), a reshape lambda and a softmax lambda written in one method
 * around a new {@code Linear(2)}, its own loss ({@code -sum(label * log(p))}), and Adam with the
 * module's parameters at a tenth of the rate. In bf16 it stopped at its first step ("Gradient
 * values are all zeros"), and its reshape ran as an fp32 island beside the softmax.
 */
class TransferFreshFruitTest {

    private static final int BATCH = 8;

    @Test
    void theProgramTrainsInBf16AsInFp32() throws Exception {
        float fp32 = train(null);
        float bf16 = train("mixed_bfloat16");
        System.out.printf(
                "TransferFreshFruit loss after 2 epochs: fp32 %.5f, bf16 %.5f%n", fp32, bf16);
        assertEquals(fp32, bf16, 0.02f * Math.abs(fp32), "bf16 against fp32");
    }

    /**
     * Two epochs of 16 images in batches of 8, frozen base; returns the loss of the trained model
     * on them.
     */
    private static float train(String policy) throws Exception {
        Engine.getInstance().setRandomSeed(3);
        Path fixtures =
                Path.of(
                                TransferFreshFruitTest.class
                                        .getResource("/torchscript/traced_cnn.pt")
                                        .toURI())
                        .getParent();
        try (Model embedding = Model.newInstance("traced_cnn", "PyTorch");
                Model model = Model.newInstance("fruit", "PyTorch");
                NDManager data = NDManager.newBaseManager("PyTorch")) {
            embedding.load(fixtures, "traced_cnn", Map.of("trainParam", "false"));
            Block baseBlock = embedding.getBlock();
            Block blocks =
                    new SequentialBlock()
                            .add(baseBlock)
                            .addSingleton(nd -> nd.reshape(nd.getShape().get(0), -1))
                            .add(Linear.builder().setUnits(2).build())
                            .addSingleton(nd -> nd.softmax(1));
            MixedPrecisionBlock wrapped = policy == null ? null : Amp.wrap(blocks, policy);
            model.setBlock(wrapped == null ? blocks : wrapped);
            float lr = 0.001f;
            FixedPerVarTracker.Builder rates = FixedPerVarTracker.builder().setDefaultValue(lr);
            for (Pair<String, Parameter> p : baseBlock.getParameters()) {
                rates.put(p.getValue().getId(), 0.1f * lr);
            }
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(new SoftmaxCrossEntropy())
                            .optOptimizer(
                                    Adam.builder().optLearningRateTracker(rates.build()).build());
            try (Trainer trainer =
                    model.newTrainer(wrapped == null ? config : Amp.configure(config, wrapped))) {
                trainer.initialize(new Shape(BATCH, 3, 16, 16));
                NDArray x = data.randomNormal(new Shape(2L * BATCH, 3, 16, 16));
                NDArray y =
                        data.randomInteger(0, 2, new Shape(2L * BATCH), DataType.INT32)
                                .oneHot(2)
                                .toType(DataType.FLOAT32, false);
                ArrayDataset dataset =
                        new ArrayDataset.Builder()
                                .setData(x)
                                .optLabels(y)
                                .setSampling(BATCH, false)
                                .build();
                EasyTrain.fit(trainer, 2, dataset, null);
                if (wrapped != null) {
                    ArithmeticShare share = wrapped.getArithmeticShare(data.getDevice());
                    assertEquals(1.0, share.getLowShare(), 1e-9, share.toString());
                    PrecisionSummary summary =
                            wrapped.getPrecisionSummary(data.getDevice(), trainer.getManager());
                    String reshape =
                            summary.toString()
                                    .lines()
                                    .filter(line -> line.contains("02LambdaBlock"))
                                    .findFirst()
                                    .orElseThrow();
                    assertTrue(
                            !reshape.contains("fp32"),
                            "the reshape runs as its input comes, not as an fp32 island: "
                                    + reshape);
                    assertEquals(Precision.BF16, wrapped.getPolicy().getComputePrecision());
                }
                NDList predictions = trainer.evaluate(new NDList(x));
                return new SoftmaxCrossEntropy().evaluate(new NDList(y), predictions).getFloat();
            }
        }
    }

    /** TransferFreshFruit's own loss, for one-hot labels. */
    private static final class SoftmaxCrossEntropy extends Loss {
        SoftmaxCrossEntropy() {
            super("SoftmaxCrossEntropy");
        }

        @Override
        public NDArray evaluate(NDList labels, NDList predictions) {
            NDArray pred = predictions.singletonOrThrow().log();
            NDArray lab = labels.singletonOrThrow().reshape(pred.getShape());
            return pred.mul(lab).neg().sum(new int[] {-1}, true).mean();
        }
    }
}
