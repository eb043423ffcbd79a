package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.dataset.Dataset;
import org.junit.jupiter.api.Test;

/**
 * A small CNN trained one epoch on Fashion-MNIST reaches the same test accuracy in bf16 mixed
 * precision as in plain DJL fp32.
 */
class Bf16AccuracyTest {

    private static final int TRAIN_IMAGES = 20_000;
    private static final int TEST_IMAGES = 10_000;
    private static final int BATCH = 64;
    private static final double FLOOR = 0.75;
    private static final double TOLERANCE = 0.01;

    @Test
    void cnnReachesFp32AccuracyInBf16() throws Exception {
        try (NDManager data = NDManager.newBaseManager("PyTorch")) {
            FashionMnist train = ItData.prepare(Dataset.Usage.TRAIN, BATCH, TRAIN_IMAGES, data);
            FashionMnist test = ItData.prepare(Dataset.Usage.TEST, 500, TEST_IMAGES, data);
            FashionRun run =
                    new FashionRun(Models::smallCnn, new Shape(BATCH, 1, 28, 28), 0.002f, 7);

            FashionRun.Result fp32 = run.run(null, null, 1, train, test);
            FashionRun.Result bf16 = run.run("mixed_bfloat16", null, 1, train, test);

            assertEquals(fp32.initialWeightsHash, bf16.initialWeightsHash, "same initial weights");
            assertEquals(fp32.batchOrderHash, bf16.batchOrderHash, "same batches in same order");
            assertEquals((TRAIN_IMAGES + BATCH - 1) / BATCH, bf16.steps, "bf16 steps");
            assertEquals(0, bf16.skippedSteps, "bf16 needs no loss scaling, skips nothing");
            assertEquals(fp32.accuracy, fp32.djlValidateAccuracy, 1e-6, "DJL's evaluator agrees");
            assertEquals(bf16.accuracy, bf16.djlValidateAccuracy, 1e-6, "DJL's evaluator agrees");
            assertEquals(
                    fp32.trainLoss,
                    bf16.trainLoss,
                    0.25 * fp32.trainLoss,
                    "DJL's listeners report the unscaled training loss");
            assertTrue(fp32.accuracy > FLOOR, "fp32 accuracy " + fp32.accuracy);
            assertTrue(bf16.accuracy > FLOOR, "bf16 accuracy " + bf16.accuracy);
            assertEquals(
                    fp32.accuracy,
                    bf16.accuracy,
                    TOLERANCE,
                    "bf16 test accuracy must be within 1 point of fp32's");
        }
    }
}
