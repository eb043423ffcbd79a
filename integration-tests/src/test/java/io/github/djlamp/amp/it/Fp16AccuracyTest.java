package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.dataset.Dataset;
import org.junit.jupiter.api.Test;

/**
 * An MLP 784-64-10 trained on Fashion-MNIST reaches the same test accuracy in fp16 mixed precision
 * (dynamic loss scaling) as in plain DJL fp32. fp16 arithmetic is 10-200x slower than fp32 on this
 * CPU, hence the small model and the few thousand images.
 */
class Fp16AccuracyTest {

    private static final int TRAIN_IMAGES = 12_000;
    private static final int TEST_IMAGES = 10_000;
    private static final int BATCH = 64;
    private static final double FLOOR = 0.75;
    private static final double TOLERANCE = 0.01;

    @Test
    void mlpReachesFp32AccuracyInFp16() throws Exception {
        try (NDManager data = NDManager.newBaseManager("PyTorch")) {
            FashionMnist train = ItData.prepare(Dataset.Usage.TRAIN, BATCH, TRAIN_IMAGES, data);
            FashionMnist test = ItData.prepare(Dataset.Usage.TEST, 500, TEST_IMAGES, data);
            FashionRun run =
                    new FashionRun(
                            () -> Models.mlp(64, 10), new Shape(BATCH, 1, 28, 28), 0.002f, 11);

            FashionRun.Result fp32 = run.run(null, null, 1, train, test);
            FashionRun.Result fp16 = run.run("mixed_float16", null, 1, train, test);

            assertEquals(fp32.initialWeightsHash, fp16.initialWeightsHash, "same initial weights");
            assertEquals(fp32.batchOrderHash, fp16.batchOrderHash, "same batches in same order");
            assertEquals((TRAIN_IMAGES + BATCH - 1) / BATCH, fp16.steps, "fp16 steps");
            assertTrue(
                    fp16.skippedSteps < fp16.steps / 10,
                    "dynamic loss scaling skips few steps: " + fp16.skippedSteps);
            assertEquals(fp32.accuracy, fp32.djlValidateAccuracy, 1e-6, "DJL's evaluator agrees");
            assertEquals(fp16.accuracy, fp16.djlValidateAccuracy, 1e-6, "DJL's evaluator agrees");
            assertEquals(
                    fp32.trainLoss,
                    fp16.trainLoss,
                    0.25 * fp32.trainLoss,
                    "DJL's listeners report the unscaled training loss");
            assertTrue(fp32.accuracy > FLOOR, "fp32 accuracy " + fp32.accuracy);
            assertTrue(fp16.accuracy > FLOOR, "fp16 accuracy " + fp16.accuracy);
            assertEquals(
                    fp32.accuracy,
                    fp16.accuracy,
                    TOLERANCE,
                    "fp16 test accuracy must be within 1 point of fp32's");
        }
    }
}
