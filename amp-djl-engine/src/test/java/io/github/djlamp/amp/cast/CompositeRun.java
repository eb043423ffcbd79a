package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.translate.Batchifier;
import io.github.djlamp.amp.cast.strategy.AutocastStage;
import java.util.ArrayList;
import java.util.List;

/**
 * A few EasyTrain steps of a DJL composite on one fixed batch, and what djl-amp ran it as: the
 * losses after each step (evaluated on the batch), the engine-autocast stage and the share of the
 * arithmetic in 16 bits.
 *
 * @param losses the loss after each step
 * @param stage the root's engine-autocast stage, or null where the root is not one (or unwrapped)
 * @param lowShare the share of the first forward's arithmetic in 16 bits
 */
record CompositeRun(List<Float> losses, AutocastStage stage, double lowShare) {

    /**
     * Trains {@code steps} steps on {@code x} and {@code y}, each step on copies freed with it.
     *
     * @param wrapped the wrapper, or null for plain DJL
     */
    static CompositeRun train(
            Trainer trainer,
            MixedPrecisionBlock wrapped,
            NDManager data,
            NDList x,
            NDArray y,
            int batchSize,
            int steps) {
        List<Float> losses = new ArrayList<>();
        for (int step = 0; step < steps; step++) {
            NDManager stepManager = data.newSubManager();
            NDArray ys = y.duplicate();
            ys.attach(stepManager);
            try (Batch batch =
                    new Batch(
                            stepManager,
                            copies(x, stepManager),
                            new NDList(ys),
                            batchSize,
                            Batchifier.STACK,
                            Batchifier.STACK,
                            step,
                            steps)) {
                EasyTrain.trainBatch(trainer, batch);
                trainer.step();
            }
            try (NDManager eval = data.newSubManager()) {
                NDList out = trainer.evaluate(copies(x, eval));
                losses.add(trainer.getLoss().evaluate(new NDList(y), out).getFloat());
            }
        }
        if (wrapped == null) {
            return new CompositeRun(losses, null, 0);
        }
        AutocastStage stage =
                wrapped.shadowOn(data.getDevice(), data) instanceof AutocastStage s ? s : null;
        ArithmeticShare share = wrapped.getArithmeticShare(data.getDevice());
        return new CompositeRun(losses, stage, share == null ? 0 : share.getLowShare());
    }

    private static NDList copies(NDList arrays, NDManager manager) {
        NDList copies = new NDList(arrays.size());
        for (NDArray a : arrays) {
            NDArray copy = a.duplicate();
            copy.attach(manager);
            copies.add(copy);
        }
        return copies;
    }

    /**
     * Asserts what djl-amp decided for this run, whatever the platform: where the stage's check
     * against fp32 passed, at least 80% of the arithmetic in 16 bits and the last loss within 3% of
     * fp32's; where it found the engine's 16-bit kernels wrong, fp32's losses (to 0.1%). The two
     * differ only on a machine whose kernels are wrong.
     */
    void assertDecidedRightAgainst(CompositeRun fp32, String policy) {
        float last = losses.get(losses.size() - 1);
        float reference = fp32.losses.get(fp32.losses.size() - 1);
        String refused = stage.fallbackReason();
        if (refused != null) {
            System.out.println(policy + ": the check refused 16 bits on this machine: " + refused);
            assertTrue(refused.startsWith("its check against fp32"), policy + ": " + refused);
            // fp32 through djl-amp's fused Adam, not DJL's own: TabNet under policy float32 ends
            // 1.04e-4 (relative) off plain DJL's loss after four steps, as it does here
            assertEquals(reference, last, 1e-3f * Math.abs(reference), policy);
            return;
        }
        assertTrue(stage.lastComputedPrecision().isReduced(), policy);
        assertTrue(lowShare >= 0.8, policy + ": share " + lowShare);
        assertTrue(
                Math.abs(last - reference) <= 0.03 * Math.abs(reference),
                policy + ": loss " + last + " against fp32's " + reference);
    }
}
