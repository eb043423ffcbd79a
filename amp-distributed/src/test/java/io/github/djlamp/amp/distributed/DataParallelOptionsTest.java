package io.github.djlamp.amp.distributed;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.GradientReducer;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * {@code DataParallel.configure}'s options: the gradient reducer is passed in (the bucketed MPI
 * all-reduce by default), and the collective deadline set there replaces the world's.
 */
class DataParallelOptionsTest {

    @Test
    void theDefaultsAreTheBucketedAllReduceAndTheWorldsDeadline() {
        DataParallelOptions defaults = DataParallelOptions.defaults();
        assertEquals(BucketedAllReduce.DEFAULT_BUCKET_BYTES, defaults.getBucketBytes());
        assertNull(defaults.getGradientReducer());
        assertNull(defaults.getCollectiveTimeout());
        BucketedAllReduce reducer =
                assertInstanceOf(BucketedAllReduce.class, defaults.reducerFor(World.local()));
        assertEquals(BucketedAllReduce.DEFAULT_BUCKET_BYTES, reducer.getBucketBytes());
        BucketedAllReduce small =
                assertInstanceOf(
                        BucketedAllReduce.class,
                        DataParallelOptions.builder()
                                .bucketBytes(0)
                                .build()
                                .reducerFor(World.local()));
        assertEquals(0, small.getBucketBytes());
    }

    @Test
    void aReducerPassedInIsTheOneTheTrainerSteps() throws Exception {
        AtomicInteger calls = new AtomicInteger();
        GradientReducer counting = (gradients, stepManager) -> calls.incrementAndGet();
        DataParallelOptions options =
                DataParallelOptions.builder().gradientReducer(counting).build();
        assertSame(counting, options.reducerFor(World.local()));
        try (Model model = Model.newInstance("reducer");
                NDManager manager = NDManager.newBaseManager()) {
            model.setBlock(Amp.wrap(Linear.builder().setUnits(2).build(), "fp32"));
            AmpTrainingConfig amp = Amp.configure(config(), model.getBlock());
            try (Trainer trainer =
                    model.newTrainer(DataParallel.configure(amp, World.local(), options))) {
                trainer.initialize(new Shape(4, 3));
                ArrayDataset data =
                        new ArrayDataset.Builder()
                                .setData(manager.randomNormal(new Shape(8, 3)))
                                .optLabels(manager.randomNormal(new Shape(8, 2)))
                                .setSampling(4, false)
                                .build();
                EasyTrain.fit(trainer, 1, data, null);
            }
        }
        assertEquals(2, calls.get(), "once per optimizer step: 8 rows in batches of 4");
    }

    @Test
    void theDeadlineSetThereReplacesTheWorlds() {
        World world = World.local();
        assertEquals(World.DEFAULT_TIMEOUT_SECONDS, world.getTimeout().toSeconds());
        try (Model model = Model.newInstance("deadline")) {
            model.setBlock(Amp.wrap(Linear.builder().setUnits(2).build(), "fp32"));
            DataParallel.configure(
                    Amp.configure(config(), model.getBlock()),
                    world,
                    DataParallelOptions.builder()
                            .collectiveTimeout(Duration.ofSeconds(42))
                            .build());
        }
        assertEquals(Duration.ofSeconds(42), world.getTimeout());
    }

    @Test
    void badOptionsAreRejectedWithTheFix() {
        IllegalArgumentException negative =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> DataParallelOptions.builder().bucketBytes(-1));
        assertTrue(negative.getMessage().contains("bucketBytes must be >= 0"));
        IllegalArgumentException both =
                assertThrows(
                        IllegalArgumentException.class,
                        () ->
                                DataParallelOptions.builder()
                                        .bucketBytes(1024)
                                        .gradientReducer((gradients, stepManager) -> {})
                                        .build());
        assertTrue(both.getMessage().contains("set one of them"), both.getMessage());
        NullPointerException noReducer =
                assertThrows(
                        NullPointerException.class,
                        () -> DataParallelOptions.builder().gradientReducer(null));
        assertTrue(noReducer.getMessage().contains("BucketedAllReduce"), noReducer.getMessage());
        for (Duration timeout : new Duration[] {null, Duration.ZERO, Duration.ofSeconds(-1)}) {
            IllegalArgumentException e =
                    assertThrows(
                            IllegalArgumentException.class,
                            () -> DataParallelOptions.builder().collectiveTimeout(timeout));
            assertTrue(e.getMessage().contains("positive duration"), e.getMessage());
        }
        try (Model model = Model.newInstance("null")) {
            model.setBlock(Amp.wrap(Linear.builder().setUnits(2).build(), "fp32"));
            AmpTrainingConfig amp = Amp.configure(config(), model.getBlock());
            NullPointerException noOptions =
                    assertThrows(
                            NullPointerException.class,
                            () ->
                                    DataParallel.configure(
                                            amp, World.local(), (DataParallelOptions) null));
            assertTrue(
                    noOptions.getMessage().contains("DataParallelOptions.defaults()"),
                    noOptions.getMessage());
            NullPointerException noWorld =
                    assertThrows(
                            NullPointerException.class, () -> DataParallel.configure(amp, null));
            assertTrue(noWorld.getMessage().contains("World.init()"), noWorld.getMessage());
        }
    }

    private static DefaultTrainingConfig config() {
        return new DefaultTrainingConfig(Loss.l2Loss())
                .optOptimizer(Optimizer.sgd().setLearningRateTracker(Tracker.fixed(0.1f)).build());
    }
}
