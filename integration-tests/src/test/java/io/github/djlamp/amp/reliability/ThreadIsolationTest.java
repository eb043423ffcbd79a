package io.github.djlamp.amp.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.it.GcSafe;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.scale.ScalerState;
import io.github.djlamp.amp.train.AmpSession;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/**
 * Two trainers with their own scalers in two threads do not affect each other.
 *
 * <p>DJL's PyTorch engine allows one {@code GradientCollector} at a time in a JVM (a static flag in
 * {@code PtGradientCollector}), so the threads take turns for the forward and backward of a batch;
 * the optimizer steps and everything else interleave freely.
 */
class ThreadIsolationTest {

    private static final Object BACKWARD = new Object();

    /** Trains 60 steps; every {@code overflowEvery}-th batch has an Inf in its data. */
    private static ScalerState train(int overflowEvery) {
        try (Model model = Model.newInstance("t" + overflowEvery, "PyTorch")) {
            model.setBlock(
                    Amp.wrap(
                            new SequentialBlock()
                                    .add(Linear.builder().setUnits(16).build())
                                    .add(Activation.reluBlock())
                                    .add(Linear.builder().setUnits(2).build()),
                            "mixed_bfloat16"));
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(GcSafe.l2Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.01f))
                                            .build());
            LossScaling scaling = LossScaling.dynamicBuilder().growthInterval(4).build();
            try (Trainer trainer =
                    model.newTrainer(Amp.configure(config, model.getBlock(), scaling))) {
                trainer.initialize(new Shape(8, 4));
                for (int step = 1; step <= 60; step++) {
                    NDManager m = trainer.getManager().newSubManager();
                    NDArray x = m.randomNormal(new Shape(8, 4));
                    if (step % overflowEvery == 0) {
                        x = x.div(0f);
                    }
                    Batch batch =
                            new Batch(
                                    m,
                                    new NDList(x),
                                    new NDList(m.zeros(new Shape(8, 2))),
                                    8,
                                    null,
                                    null,
                                    0,
                                    1);
                    synchronized (BACKWARD) {
                        EasyTrain.trainBatch(trainer, batch);
                    }
                    trainer.step();
                    batch.close();
                }
                return AmpSession.of(trainer).getScaler().state();
            }
        }
    }

    @Test
    void twoTrainersInTwoThreadsKeepTheirOwnState() throws Exception {
        Engine.getInstance().setRandomSeed(9);
        ScalerState aloneA = train(5);
        ScalerState aloneB = train(7);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            Future<ScalerState> a = pool.submit((Callable<ScalerState>) () -> train(5));
            Future<ScalerState> b = pool.submit((Callable<ScalerState>) () -> train(7));
            assertEquals(aloneA, a.get(), "trainer A in parallel equals A alone");
            assertEquals(aloneB, b.get(), "trainer B in parallel equals B alone");
        } finally {
            pool.shutdownNow();
        }
        assertEquals(12, aloneA.getSkippedSteps());
        assertEquals(8, aloneB.getSkippedSteps());
    }
}
