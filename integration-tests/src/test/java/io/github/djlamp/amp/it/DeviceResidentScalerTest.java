package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.metric.Metrics;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.pytorch.PtAmpBackend;
import io.github.djlamp.amp.scale.LossScaleCollapsedException;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.scale.ScalerState;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.AmpTrainingListener;
import io.github.djlamp.amp.train.LossScalingOptimizer;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.IntPredicate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * With fused optimizer steps the loss scaler's state lives on the device, as in PyTorch: a training
 * step makes no host read in steady state, a skipped step still changes nothing (weights, the fused
 * optimizer's state, BatchNorm's running statistics, restored on the device), the host mirror is
 * read every hostSyncInterval steps, and divergence is reported at those reads.
 */
class DeviceResidentScalerTest {

    private static final float INIT_SCALE = 1024f;

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void aStepMakesNoHostReadBetweenTheIntervalReads(boolean scheduled) {
        int interval = 10;
        int steps = 20;
        // a schedule's rates for the next 256 steps go to the device at the first step
        Optimizer optimizer = scheduled ? scheduledAdam() : adam();
        try (Rig rig =
                new Rig(optimizer, LossScaling.dynamicBuilder().initScale(INIT_SCALE), interval)) {
            assertTrue(rig.scaler.isStateOnDevice(), "fused + one device: state on the device");
            rig.step(0, i -> false); // warm-up: first-step work (casts, state) out of the count
            NDManager root = root(rig.trainer.getManager());
            int liveAfterWarmUp = 0;
            long[] reads = new long[steps];
            for (int i = 1; i <= steps; i++) {
                long before = hostReads();
                rig.step(i, s -> false);
                reads[i - 1] = hostReads() - before;
                if (i == 1) {
                    liveAfterWarmUp = root.getManagedArrays().size();
                }
            }
            long[] expected = new long[steps];
            for (int i = 1; i <= steps; i++) {
                // the scaler's reads come every `interval` steps (counted from its last read)
                expected[i - 1] = (i + 1) % interval == 0 ? 1 : 0;
            }
            assertArrayEquals(expected, reads, "host reads per step");
            assertEquals(
                    liveAfterWarmUp,
                    root.getManagedArrays().size(),
                    "live native arrays flat: every per-step array freed");
            assertEquals(steps + 1, rig.scaler.getSteps());
            assertEquals(0, rig.scaler.getSkippedSteps());
            assertEquals(INIT_SCALE, rig.scaler.getScale());
        }
    }

    @Test
    void aSkippedStepChangesNothingAndIsCountedOnTheDevice() {
        int bad = 3;
        try (Rig rig = new Rig(adam(), LossScaling.dynamicBuilder().initScale(INIT_SCALE), 50)) {
            for (int i = 0; i < bad; i++) {
                rig.step(i, s -> false);
            }
            Map<String, Snapshots.Bits> weights = Snapshots.weights(rig.block);
            Map<String, Snapshots.Bits> fusedState = rig.fusedState();
            double adamSteps = rig.optimizer.getFusedStepCount().toDoubleArray()[0];
            assertEquals(bad, adamSteps, "fused Adam counted the clean steps");
            long readsBefore = hostReads();

            rig.step(bad, s -> s == bad);

            assertEquals(0, hostReads() - readsBefore, "the skip was decided on the device");
            assertEquals(weights, Snapshots.weights(rig.block), "weights and running statistics");
            assertEquals(fusedState, rig.fusedState(), "fused Adam moments bitwise unchanged");
            assertEquals(
                    adamSteps,
                    rig.optimizer.getFusedStepCount().toDoubleArray()[0],
                    "fused Adam's step count unchanged");
            // asked for: read now
            assertEquals(1, rig.scaler.getSkippedSteps());
            assertEquals(bad + 1, rig.scaler.getSteps());
            assertEquals(INIT_SCALE * 0.5f, rig.scaler.getScale(), "scale halved on the device");
            assertEquals(0, rig.scaler.getGrowthTracker());
            NDArray deviceScale = rig.scaler.getScaleArray();
            assertEquals(INIT_SCALE * 0.5f, deviceScale.getFloat(), "the loss scale in use");

            rig.step(bad + 1, s -> false);
            assertNotEquals(weights, Snapshots.weights(rig.block), "the next step applies");
            assertNotEquals(fusedState, rig.fusedState(), "and moves the moments");
            for (Snapshots.Bits bits : Snapshots.weights(rig.block).values()) {
                assertTrue(bits.allFinite(), "the bad gradient did not leak into the next step");
            }
        }
    }

    @Test
    void deviceStateTrainsLikeTheHostReadEveryStep() {
        IntPredicate poisoned = s -> s == 2 || s == 5;
        Map<String, Snapshots.Bits> everyStep;
        ScalerState hostState;
        try (Rig rig = new Rig(adam(), LossScaling.dynamicBuilder().initScale(INIT_SCALE), 1)) {
            for (int i = 0; i < 9; i++) {
                rig.step(i, poisoned);
            }
            everyStep = Snapshots.weights(rig.block);
            hostState = rig.scaler.state();
        }
        try (Rig rig = new Rig(adam(), LossScaling.dynamicBuilder().initScale(INIT_SCALE), 4)) {
            for (int i = 0; i < 9; i++) {
                rig.step(i, poisoned);
            }
            assertEquals(everyStep, Snapshots.weights(rig.block), "bitwise the same training");
            assertEquals(hostState, rig.scaler.state());
            assertEquals(2, rig.scaler.getSkippedSteps());
        }
    }

    @Test
    void theSavedStateIsTheLastReadsUntilSyncToHost() {
        try (Rig rig = new Rig(sgd(), LossScaling.dynamicBuilder().initScale(INIT_SCALE), 5)) {
            for (int i = 0; i < 7; i++) {
                rig.step(i, s -> s == 6);
            }
            // read at step 4 (the fifth): the checkpoint property holds that state
            ScalerState saved =
                    ScalerState.parse(rig.model.getProperty(AmpSession.SCALER_STATE_PROPERTY));
            assertEquals(5, saved.getSteps());
            assertEquals(0, saved.getSkippedSteps());
            long before = hostReads();
            rig.amp.syncToHost();
            assertEquals(1, hostReads() - before, "one read for the whole state");
            saved = ScalerState.parse(rig.model.getProperty(AmpSession.SCALER_STATE_PROPERTY));
            assertEquals(7, saved.getSteps());
            assertEquals(1, saved.getSkippedSteps());
            assertEquals(INIT_SCALE * 0.5f, saved.getScale());
        }
    }

    /**
     * A custom loop that saves between reads, without syncToHost, still saves the current state.
     */
    @Test
    void modelSaveBetweenReadsWritesTheCurrentState(@TempDir Path dir) throws Exception {
        ScalerState current;
        try (Rig rig = new Rig(sgd(), LossScaling.dynamicBuilder().initScale(INIT_SCALE), 5)) {
            for (int i = 0; i < 7; i++) {
                rig.step(i, s -> s == 6);
            }
            assertEquals(
                    5,
                    ScalerState.parse(rig.model.getProperty(AmpSession.SCALER_STATE_PROPERTY))
                            .getSteps(),
                    "before the save: the last read's state");
            long before = hostReads();
            rig.model.save(dir, "device-state");
            assertEquals(1, hostReads() - before, "one read as the model is saved");
            current = rig.scaler.state();
            assertEquals(7, current.getSteps());
            assertEquals(1, current.getSkippedSteps());
            assertEquals(INIT_SCALE * 0.5f, current.getScale());
        }
        try (Model loaded = Model.newInstance("device-state", "PyTorch")) {
            loaded.setBlock(Amp.wrap(model(), "mixed_float16"));
            loaded.load(dir, "device-state");
            String saved = loaded.getProperty(AmpSession.SCALER_STATE_PROPERTY);
            assertTrue(
                    saved.startsWith(current + ";mode=DYNAMIC;"),
                    "the file holds the state at the save: " + saved);
        }
    }

    @Test
    void aCollapsedScaleIsReportedAtTheNextHostRead() {
        // 2 -> 1 on the first overflow; the second would go below the minimum 1: collapse
        LossScaling.Builder scaling = LossScaling.dynamicBuilder().initScale(2f).minScale(1f);
        IntPredicate poisoned = s -> s <= 1;
        try (Rig rig = new Rig(sgd(), scaling, 4)) {
            // the collapse at step 1 is on the device; steps 2 and 3 are clean; read at step 3
            rig.step(0, poisoned);
            rig.step(1, poisoned);
            rig.step(2, poisoned);
            assertThrows(LossScaleCollapsedException.class, () -> rig.step(3, poisoned));
        }
        try (Rig rig = new Rig(sgd(), scaling, 1)) {
            rig.step(0, poisoned);
            assertThrows(LossScaleCollapsedException.class, () -> rig.step(1, poisoned));
        }
    }

    @Test
    void aFixedScaleOverflowingStepAfterStepStopsAtTheNextHostRead() {
        int limit = AmpSession.FIXED_SCALE_OVERFLOW_LIMIT;
        IntPredicate poisoned = s -> s < limit;
        try (Rig rig = new Rig(sgd(), LossScaling.fixed(INIT_SCALE), 12)) {
            // the run reaches the limit at step limit - 1 = 7, then clean steps; read at step 11
            for (int i = 0; i < 11; i++) {
                rig.step(i, poisoned);
            }
            AmpException e = assertThrows(AmpException.class, () -> rig.step(11, poisoned));
            assertTrue(e.getMessage().contains("overflowed on " + limit), e.getMessage());
        }
        try (Rig rig = new Rig(sgd(), LossScaling.fixed(INIT_SCALE), 1)) {
            for (int i = 0; i < limit - 1; i++) {
                rig.step(i, poisoned);
            }
            assertThrows(AmpException.class, () -> rig.step(limit - 1, poisoned));
        }
    }

    @Test
    void readsAskedForBetweenStepsDoNotPutOffTheScheduledRead() {
        int limit = AmpSession.FIXED_SCALE_OVERFLOW_LIMIT;
        IntPredicate poisoned = s -> s < limit;
        try (Rig rig = new Rig(sgd(), LossScaling.fixed(INIT_SCALE), 12)) {
            for (int i = 0; i < 11; i++) {
                rig.step(i, poisoned);
                rig.scaler.getScale(); // a user logging the scale after every step
            }
            AmpException e = assertThrows(AmpException.class, () -> rig.step(11, poisoned));
            assertTrue(e.getMessage().contains("overflowed on " + limit), e.getMessage());
        }
    }

    @Test
    void easyTrainReportsMetricsAtHostReadsAndSavesTheStateAtTheEpochEnd() throws Exception {
        Engine.getInstance().setRandomSeed(7);
        try (Model model = Model.newInstance("device-state", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(model(), "mixed_float16");
            model.setBlock(block);
            AmpTrainingConfig config =
                    Amp.configure(
                            new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                                    .optOptimizer(adam()),
                            block,
                            fused().lossScaling(
                                            LossScaling.dynamicBuilder()
                                                    .initScale(INIT_SCALE)
                                                    .build())
                                    .hostSyncInterval(3)
                                    .build());
            try (Trainer trainer = model.newTrainer(config);
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.setMetrics(new Metrics());
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                ArrayDataset dataset =
                        new ArrayDataset.Builder()
                                .setData(task.x)
                                .optLabels(task.y)
                                .setSampling(ToyTask.BATCH, false)
                                .build();
                EasyTrain.fit(trainer, 1, dataset, null); // 4 batches: reads at 3 and the end
                LossScaler scaler = AmpSession.of(trainer).getScaler();
                assertTrue(scaler.isStateOnDevice());
                assertTrue(scaler.isMirrorFresh(), "the epoch's end read the state");
                assertEquals(
                        2,
                        trainer.getMetrics().getMetric(AmpTrainingListener.LOSS_SCALE).size(),
                        "metrics at the host read of batch 3 and at the epoch's end");
                assertEquals(4, scaler.getSteps());
                String saved = model.getProperty(AmpSession.SCALER_STATE_PROPERTY);
                assertEquals(scaler.state().withOrigin(scaler.getConfig()).toString(), saved);
            }
        }
    }

    @Test
    void aSkippedBatchsLossStaysOutOfTheReportedTrainingLoss() throws Exception {
        Engine.getInstance().setRandomSeed(7);
        try (Model model = Model.newInstance("device-state-loss", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(model(), "mixed_float16");
            model.setBlock(block);
            InfiniteOnBatch loss = new InfiniteOnBatch(Loss.softmaxCrossEntropyLoss(), 1);
            AmpTrainingConfig config =
                    Amp.configure(
                            new DefaultTrainingConfig(loss)
                                    .optOptimizer(adam())
                                    .addTrainingListeners(TrainingListener.Defaults.basic()),
                            block,
                            fused().lossScaling(
                                            LossScaling.dynamicBuilder()
                                                    .initScale(INIT_SCALE)
                                                    .build())
                                    .hostSyncInterval(100)
                                    .build());
            try (Trainer trainer = model.newTrainer(config);
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                ArrayDataset dataset =
                        new ArrayDataset.Builder()
                                .setData(task.x)
                                .optLabels(task.y)
                                .setSampling(ToyTask.BATCH, false)
                                .build();
                EasyTrain.fit(trainer, 1, dataset, null);
                LossScaler scaler = AmpSession.of(trainer).getScaler();
                assertTrue(scaler.isStateOnDevice());
                assertEquals(1, scaler.getSkippedSteps(), "the infinite batch was skipped");
                float reported = trainer.getTrainingResult().getTrainLoss();
                assertTrue(Float.isFinite(reported), "reported training loss " + reported);
            }
        }
    }

    /** The user's loss, infinite on one batch (DJL evaluates it twice a batch: step, report). */
    private static final class InfiniteOnBatch extends Loss {
        private final Loss inner;
        private final int badBatch;
        private int batch = -1;
        private NDArray lastLabels;

        InfiniteOnBatch(Loss inner, int badBatch) {
            super("infiniteOnBatch");
            this.inner = inner;
            this.badBatch = badBatch;
        }

        @Override
        public NDArray evaluate(NDList labels, NDList predictions) {
            NDArray loss = inner.evaluate(labels, predictions);
            if (labels.head() != lastLabels) {
                lastLabels = labels.head();
                batch++;
            }
            // backward reads the Inf: made by the engine (GcSafe), not by DJL's mul(Number)
            return batch == badBatch ? GcSafe.mul(loss, Float.POSITIVE_INFINITY) : loss;
        }
    }

    @Test
    void aPartialAccumulationWindowEndingWithTheEpochIsStepped() throws Exception {
        // EasyTrain moves the scale before the optimizer step, the epoch's flush after it: the
        // fused step must still run once for each
        Engine.getInstance().setRandomSeed(12);
        for (String policy : new String[] {"float32", "mixed_float16"}) {
            try (Model model = Model.newInstance("partial-window-fused", "PyTorch")) {
                MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, policy);
                model.setBlock(block);
                AmpTrainingConfig config =
                        Amp.configure(
                                RealProgramsRig.sgd(0.1f),
                                block,
                                fused().accumulationSteps(3).build());
                try (Trainer trainer = model.newTrainer(config);
                        NDManager data = trainer.getManager().newSubManager()) {
                    assertTrue(((LossScalingOptimizer) config.getOptimizer()).isFused());
                    trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                    EasyTrain.fit(trainer, 1, RealProgramsRig.data(data, 4), null);
                    assertEquals(2, AmpSession.of(trainer).getScaler().getSteps(), policy);
                    assertEquals(
                            0f,
                            RealProgramsRig.largestGradient(block, data),
                            policy + ": the last window was stepped and its gradients cleared");
                }
            }
        }
    }

    @Test
    void aBf16CustomLoopCallingTrainerStepAppliesEveryFusedStep() {
        Engine.getInstance().setRandomSeed(13);
        try (Model model = Model.newInstance("bf16-fused", "PyTorch");
                NDManager data = NDManager.newBaseManager()) {
            MixedPrecisionBlock block = Amp.wrap(model(), "mixed_bfloat16");
            model.setBlock(block);
            AmpTrainingConfig config =
                    Amp.configure(
                            new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                                    .optOptimizer(sgd()),
                            block,
                            fused().build());
            try (Trainer trainer = model.newTrainer(config)) {
                assertTrue(((LossScalingOptimizer) config.getOptimizer()).isFused());
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                Loss loss = Loss.softmaxCrossEntropyLoss();
                for (int i = 0; i < 3; i++) {
                    Map<String, Snapshots.Bits> before =
                            Snapshots.weights(block, Parameter::requiresGradient);
                    try (NDManager step = trainer.getManager().newSubManager()) {
                        NDArray x = task.x.get(task.rows(i));
                        NDArray y = task.y.get(task.rows(i));
                        x.attach(step);
                        y.attach(step);
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            collector.backward(
                                    loss.evaluate(new NDList(y), trainer.forward(new NDList(x))));
                        }
                        trainer.step(); // no scaler call: bf16 needs none
                    }
                    assertNotEquals(
                            before,
                            Snapshots.weights(block, Parameter::requiresGradient),
                            "step " + i + " applied");
                }
            }
        }
    }

    private static Optimizer adam() {
        return Optimizer.adam().optLearningRateTracker(Tracker.fixed(0.01f)).build();
    }

    private static Optimizer scheduledAdam() {
        return Optimizer.adam()
                .optLearningRateTracker(
                        Tracker.warmUp()
                                .optWarmUpSteps(5)
                                .setMainTracker(
                                        Tracker.cosine()
                                                .setBaseValue(0.01f)
                                                .optFinalValue(0.001f)
                                                .setMaxUpdates(100)
                                                .build())
                                .build())
                .build();
    }

    private static Optimizer sgd() {
        return Optimizer.sgd()
                .setLearningRateTracker(Tracker.fixed(0.05f))
                .optMomentum(0.9f)
                .build();
    }

    /** Options with fused optimizer steps, which keep the scaler state on the device. */
    private static AmpOptions.Builder fused() {
        return AmpOptions.builder().fusedOptimizer(FusedOptimizer.ON);
    }

    private static long hostReads() {
        return ((PtAmpBackend) AmpBackends.forEngine("PyTorch")).getHostReadCount();
    }

    /** Linear, BatchNorm (running statistics move every forward), ReLU, Linear. */
    private static Block model() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(32).build())
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(ToyTask.CLASSES).build());
    }

    private static NDManager root(NDManager manager) {
        NDManager m = manager;
        while (m.getParentManager() != null) {
            m = m.getParentManager();
        }
        return m;
    }

    /** A fused fp16 trainer on the toy task, stepped through the custom-loop verbs. */
    private static final class Rig implements AutoCloseable {
        final Model model;
        final MixedPrecisionBlock block;
        final Trainer trainer;
        final NDManager data;
        final AmpSession amp;
        final LossScaler scaler;
        final LossScalingOptimizer optimizer;
        final ToyTask task;

        Rig(Optimizer inner, LossScaling.Builder scaling, int interval) {
            this(inner, scaling.build(), interval);
        }

        Rig(Optimizer inner, LossScaling scaling, int interval) {
            Engine.getInstance().setRandomSeed(11);
            model = Model.newInstance("device-state", "PyTorch");
            block = Amp.wrap(model(), "mixed_float16");
            model.setBlock(block);
            AmpTrainingConfig config =
                    Amp.configure(
                            new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                                    .optOptimizer(inner),
                            block,
                            fused().lossScaling(scaling).hostSyncInterval(interval).build());
            optimizer = (LossScalingOptimizer) config.getOptimizer();
            trainer = model.newTrainer(config);
            assertTrue(optimizer.isFused());
            data = trainer.getManager().newSubManager();
            trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
            amp = AmpSession.of(trainer);
            scaler = amp.getScaler();
            task = new ToyTask(data);
        }

        /** One custom-loop step; its gradient is poisoned when {@code poisoned} says so. */
        void step(int i, IntPredicate poisoned) {
            Loss loss = Loss.softmaxCrossEntropyLoss();
            try (NDManager step = trainer.getManager().newSubManager()) {
                NDArray x = task.x.get(task.rows(i));
                NDArray y = task.y.get(task.rows(i));
                x.attach(step);
                y.attach(step);
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    NDArray l = loss.evaluate(new NDList(y), trainer.forward(new NDList(x)));
                    collector.backward(amp.scale(l));
                }
                if (poisoned.test(i)) {
                    Parameter victim = block.getParameters().get(0).getValue();
                    NDArray grad = victim.getArray().getGradient();
                    grad.attach(step);
                    grad.set(new NDIndex(0, 0), Float.NaN);
                }
                amp.step();
            }
        }

        /** The fused optimizer's state of every trainable parameter, bitwise. */
        Map<String, Snapshots.Bits> fusedState() {
            Map<String, Snapshots.Bits> result = new TreeMap<>();
            for (Pair<String, Parameter> pair : block.getParameters()) {
                NDList buffers = optimizer.getFusedState(pair.getValue().getId());
                for (int b = 0; b < buffers.size(); b++) {
                    result.put(pair.getKey() + "#" + b, Snapshots.Bits.of(buffers.get(b)));
                }
            }
            assertFalse(result.isEmpty(), "the fused optimizer has state");
            return result;
        }

        @Override
        public void close() {
            data.close();
            trainer.close();
            model.close();
        }
    }
}
