package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.inference.Predictor;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingConfig;
import ai.djl.training.dataset.Batch;
import ai.djl.training.dataset.Dataset;
import ai.djl.training.dataset.RandomAccessDataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.translate.NoopTranslator;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.train.AmpSession;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A wrapped block is the user's block on disk: the same parameter bytes, fp32 files load into it,
 * AMP-trained files load into plain DJL, and inference through a {@link Predictor} gives fp32
 * outputs close to the plain block's.
 */
class WrappedVsUnwrappedTest {

    private static final int BATCH = 32;
    private static final int BATCHES = 40;
    private static final Shape INPUT = new Shape(BATCH, 1, 28, 28);

    private static NDManager dataManager;
    private static RandomAccessDataset images;

    @TempDir Path dir;

    @BeforeAll
    static void loadImages() throws Exception {
        dataManager = NDManager.newBaseManager("PyTorch");
        images = ItData.prepare(Dataset.Usage.TEST, BATCH, BATCHES * BATCH, dataManager);
    }

    @AfterAll
    static void closeImages() {
        dataManager.close();
    }

    @Test
    void wrappedSavesTheSameParameterBytesAsTheUnwrappedBlock() throws Exception {
        Engine.getInstance().setRandomSeed(31);
        try (Model model = Model.newInstance("wrapped", "PyTorch")) {
            MixedPrecisionBlock wrapped = Amp.wrap(Models.smallCnn(), "mixed_bfloat16");
            model.setBlock(wrapped);
            try (Trainer trainer = model.newTrainer(Amp.configure(config(), model.getBlock()))) {
                trainer.initialize(INPUT);
                EasyTrain.fit(trainer, 1, images, null);
                assertEquals(BATCHES, AmpSession.of(trainer).getScaler().getSteps());
            }
            byte[] wrappedBytes = parameterBytes(wrapped);
            assertArrayEquals(
                    parameterBytes(wrapped.getOriginal()),
                    wrappedBytes,
                    "the wrapper writes exactly what the wrapped block writes");

            Block plain = Models.smallCnn();
            try (NDManager m = NDManager.newBaseManager("PyTorch")) {
                plain.loadParameters(
                        m, new DataInputStream(new ByteArrayInputStream(wrappedBytes)));
                for (Pair<String, Parameter> p : plain.getParameters()) {
                    assertEquals(
                            DataType.FLOAT32,
                            p.getValue().getArray().getDataType(),
                            p.getKey() + " is saved as an fp32 master");
                }
                assertEquals(Snapshots.weights(wrapped), Snapshots.weights(plain));
                assertArrayEquals(
                        wrappedBytes,
                        parameterBytes(plain),
                        "a plain block with the same weights writes the same bytes");
            }

            // the whole model file loads into plain DJL (bf16 never scales: no scaler state)
            model.save(dir, "amp-trained");
            try (Model plainModel = Model.newInstance("plain", "PyTorch")) {
                plainModel.setBlock(Models.smallCnn());
                plainModel.load(dir, "amp-trained");
                assertEquals(Snapshots.weights(wrapped), Snapshots.weights(plainModel.getBlock()));
                assertNull(plainModel.getProperty(AmpSession.SCALER_STATE_PROPERTY));
            }
        }
    }

    @Test
    void fp32FileLoadsIntoWrappedBlockAndPredictsCloseToFp32() throws Exception {
        Engine.getInstance().setRandomSeed(37);
        Map<String, Snapshots.Bits> trained;
        try (Model fp32 = Model.newInstance("fp32", "PyTorch")) {
            fp32.setBlock(Models.smallCnn());
            try (Trainer trainer = fp32.newTrainer(config())) {
                trainer.initialize(INPUT);
                EasyTrain.fit(trainer, 1, images, null);
            }
            trained = Snapshots.weights(fp32.getBlock());
            fp32.save(dir, "fp32-trained");
        }

        try (Model plain = Model.newInstance("plain", "PyTorch");
                Model bf16 = Model.newInstance("bf16", "PyTorch");
                Model float32 = Model.newInstance("float32", "PyTorch");
                NDManager m = NDManager.newBaseManager("PyTorch")) {
            plain.setBlock(Models.smallCnn());
            plain.load(dir, "fp32-trained");
            bf16.setBlock(Amp.wrap(Models.smallCnn(), "mixed_bfloat16"));
            bf16.load(dir, "fp32-trained");
            float32.setBlock(Amp.wrap(Models.smallCnn(), "float32"));
            float32.load(dir, "fp32-trained");
            assertEquals(trained, Snapshots.weights(bf16.getBlock()), "fp32 file into wrapped");
            assertEquals(trained, Snapshots.weights(plain.getBlock()));

            Batch batch = images.getData(m).iterator().next();
            NDArray x = batch.getData().singletonOrThrow();
            NDArray labels = batch.getLabels().singletonOrThrow();
            NDArray reference = predict(plain, x);
            NDArray mixed = predict(bf16, x);
            NDArray wrappedFp32 = predict(float32, x);

            assertEquals(DataType.FLOAT32, mixed.getDataType(), "bf16 model answers in fp32");
            assertEquals(new Shape(BATCH, 10), mixed.getShape());
            assertArrayEquals(
                    reference.toFloatArray(),
                    wrappedFp32.toFloatArray(),
                    "the float32 policy is plain DJL, bit for bit");
            float range = reference.abs().max().getFloat();
            float maxError = mixed.sub(reference).abs().max().getFloat();
            long agree = mixed.argMax(1).eq(reference.argMax(1)).countNonzero().getLong();
            long correct =
                    reference
                            .argMax(1)
                            .eq(labels.toType(DataType.INT64, false))
                            .countNonzero()
                            .getLong();
            System.out.printf(
                    "predictor: logits up to %.3f, bf16 max |error| %.4f (%.2f%%), top-1 agrees"
                            + " on %d/%d (fp32 right on %d)%n",
                    range, maxError, 100 * maxError / range, agree, BATCH, correct);
            assertNotEquals(0f, maxError, "bf16 really computed in bf16");
            // bf16 keeps 8 significant bits (relative rounding 2^-9 per operation)
            assertTrue(maxError <= 0.02f * range, "bf16 logits within 2% of the fp32 range");
            assertTrue(agree >= BATCH - 2, "top-1 agrees on all but at most 2 of " + BATCH);
        }
    }

    private static NDArray predict(Model model, NDArray x) throws Exception {
        try (Predictor<NDList, NDList> predictor = model.newPredictor(new NoopTranslator())) {
            return predictor.predict(new NDList(x)).singletonOrThrow();
        }
    }

    private static TrainingConfig config() {
        return new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                .optOptimizer(
                        Optimizer.adam().optLearningRateTracker(Tracker.fixed(0.01f)).build());
    }

    private static byte[] parameterBytes(Block block) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream os = new DataOutputStream(bytes)) {
            block.saveParameters(os);
        }
        return bytes.toByteArray();
    }
}
