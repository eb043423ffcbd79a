package io.github.djlamp.amp.it;

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
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import java.util.Iterator;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * 500 training steps through djl-amp leave the number of live native arrays in the engine flat
 * after warm-up: every per-step cast, scaled loss and unscale scratch array is freed with its
 * batch, including on skipped steps.
 */
class NativeMemoryTest {

    private static final int WARM_UP = 50;
    private static final int STEPS = 500;

    @Test
    void bf16CnnTrainingKeepsLiveArraysFlat() throws Exception {
        Counts counts = train(Models::smallCnn, new Shape(1, 28, 28), 16, "mixed_bfloat16", null);
        assertEquals(counts.atWarmUp, counts.atEnd, "live native arrays, step 50 vs step 500");
    }

    @Test
    void fp16MlpTrainingWithOverflowsKeepsLiveArraysFlat() throws Exception {
        // A scale far too large and a short growth interval: the scale keeps climbing into
        // overflow and backing off, so skipped steps happen all along the measured window.
        LossScaling scaling =
                LossScaling.dynamicBuilder().initScale(16777216f).growthInterval(10).build();
        Counts counts = train(() -> Models.mlp(16, 4), new Shape(8), 8, "mixed_float16", scaling);
        assertTrue(
                counts.skippedAtEnd > counts.skippedAtWarmUp,
                "skipped steps in the window: "
                        + counts.skippedAtWarmUp
                        + " -> "
                        + counts.skippedAtEnd);
        assertEquals(counts.atWarmUp, counts.atEnd, "live native arrays, step 50 vs step 500");
    }

    private static Counts train(
            Supplier<Block> model, Shape item, int batchSize, String policy, LossScaling scaling)
            throws Exception {
        Engine.getInstance().setRandomSeed(17);
        try (Model m = Model.newInstance("memory-" + policy, "PyTorch")) {
            m.setBlock(Amp.wrap(model.get(), policy));
            DefaultTrainingConfig base =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.adam()
                                            .optLearningRateTracker(Tracker.fixed(0.001f))
                                            .build());
            try (Trainer trainer = m.newTrainer(Amp.configure(base, m.getBlock(), scaling));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(batchSize).addAll(item));
                NDArray x = data.randomNormal(new Shape(batchSize * 8).addAll(item));
                NDArray y =
                        data.randomInteger(0, 4, new Shape(batchSize * 8), DataType.INT32)
                                .toType(DataType.FLOAT32, false);
                ArrayDataset dataset =
                        new ArrayDataset.Builder()
                                .setData(x)
                                .optLabels(y)
                                .setSampling(batchSize, true)
                                .build();
                NDManager root = root(trainer.getManager());
                LossScaler scaler = AmpSession.of(trainer).getScaler();
                Counts counts = new Counts();
                Iterator<Batch> batches = trainer.iterateDataset(dataset).iterator();
                for (int step = 1; step <= STEPS; step++) {
                    if (!batches.hasNext()) {
                        batches = trainer.iterateDataset(dataset).iterator();
                    }
                    Batch batch = batches.next();
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                    batch.close();
                    if (step % 100 == 0) {
                        // an inference forward now and then: its casts must go too
                        try (NDManager eval = data.newSubManager()) {
                            NDArray probe = x.get("0:" + batchSize);
                            probe.attach(eval);
                            trainer.evaluate(new NDList(probe));
                        }
                    }
                    if (step == WARM_UP) {
                        counts.atWarmUp = root.getManagedArrays().size();
                        counts.skippedAtWarmUp = scaler.getSkippedSteps();
                    }
                }
                counts.atEnd = root.getManagedArrays().size();
                counts.skippedAtEnd = scaler.getSkippedSteps();
                System.out.printf(
                        "%s: live native arrays %d after step %d, %d after step %d; skipped"
                                + " steps %d; final scale %s%n",
                        policy,
                        counts.atWarmUp,
                        WARM_UP,
                        counts.atEnd,
                        STEPS,
                        counts.skippedAtEnd,
                        scaler.getScale());
                return counts;
            }
        }
    }

    /** The engine's system manager: every array of the engine is under it. */
    private static NDManager root(NDManager manager) {
        NDManager m = manager;
        while (m.getParentManager() != null) {
            m = m.getParentManager();
        }
        return m;
    }

    private static final class Counts {
        int atWarmUp;
        int atEnd;
        long skippedAtWarmUp;
        long skippedAtEnd;
    }
}
