package io.github.djlamp.amp.it;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.translate.Batchifier;

/**
 * A tiny classification task for tests that count steps: 64 points in 8 dimensions, the class is
 * the largest of the first four coordinates; step {@code i} always sees batch {@code i mod 4}.
 */
final class ToyTask {

    static final int BATCH = 16;
    static final int FEATURES = 8;
    static final int CLASSES = 4;
    private static final int BATCHES = 4;

    final NDArray x;
    final NDArray y;

    /** Draws the points from the engine's generator: seed the engine first. */
    ToyTask(NDManager manager) {
        x = manager.randomNormal(new Shape((long) BATCH * BATCHES, FEATURES));
        y = x.get(":, 0:" + CLASSES).argMax(1).toType(DataType.FLOAT32, false);
    }

    /** The rows step {@code step} trains on. */
    NDIndex rows(int step) {
        int start = (step % BATCHES) * BATCH;
        return new NDIndex(start + ":" + (start + BATCH));
    }

    /** The batch of step {@code step}, on a new sub-manager of the trainer's manager. */
    Batch batch(Trainer trainer, int step) {
        NDManager manager = trainer.getManager().newSubManager();
        NDArray data = x.get(rows(step));
        NDArray labels = y.get(rows(step));
        return new Batch(
                manager,
                new NDList(data),
                new NDList(labels),
                BATCH,
                Batchifier.STACK,
                Batchifier.STACK,
                step,
                Long.MAX_VALUE);
    }

    /** One {@code EasyTrain} step: forward, backward, the AMP listener's check, the update. */
    void trainStep(Trainer trainer, int step) {
        Batch batch = batch(trainer, step);
        try {
            EasyTrain.trainBatch(trainer, batch);
            trainer.step();
        } finally {
            batch.close();
        }
    }
}
