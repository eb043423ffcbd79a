package io.github.djlamp.amp.distributed;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.listener.EvaluatorTrainingListener;
import ai.djl.training.listener.LoggingTrainingListener;
import ai.djl.training.listener.MemoryTrainingListener;
import ai.djl.training.listener.SaveModelTrainingListener;
import ai.djl.training.listener.TimeMeasureTrainingListener;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.train.AmpSession;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Checkpoints are whole or absent: a save that fails in the middle leaves the previous checkpoint
 * the newest, and it loads. (A process killed mid-save: {@code MpiJobTest}.)
 */
class AtomicCheckpointTest {

    @TempDir Path dir;

    @Test
    void aSaveThatFailsMidwayLeavesThePreviousCheckpointTheNewestAndItLoads() throws Exception {
        List<float[]> saved;
        try (Model model = model()) {
            model.setProperty("Epoch", "1");
            model.setProperty(AmpSession.SCALER_STATE_PROPERTY, "saved with epoch 1");
            Path first = AtomicCheckpoint.save(model, dir, "ckpt");
            assertEquals(dir.resolve("ckpt-0001.params"), first);
            saved = weights(model.getBlock());
            for (Pair<String, Parameter> pair : model.getBlock().getParameters()) {
                pair.getValue().getArray().addi(1f);
            }
            model.setProperty("Epoch", "2");
            // DataOutputStream.writeUTF refuses more than 65535 bytes: the save fails after the
            // file's header is written and before the parameters, as a full disk would
            model.setProperty("too long", "x".repeat(70_000));
            assertThrows(IOException.class, () -> AtomicCheckpoint.save(model, dir, "ckpt"));
        }
        assertEquals(
                List.of("ckpt-0001.params"), entries(dir), "no half epoch-2 file, no leftovers");
        try (Model loaded = Model.newInstance("ckpt")) {
            loaded.setBlock(block());
            loaded.load(dir, "ckpt");
            assertEquals("1", loaded.getProperty("Epoch"));
            assertEquals(
                    "saved with epoch 1", loaded.getProperty(AmpSession.SCALER_STATE_PROPERTY));
            List<float[]> read = weights(loaded.getBlock());
            for (int i = 0; i < saved.size(); i++) {
                assertArrayEquals(saved.get(i), read.get(i));
            }
        }
    }

    @Test
    void aSaveInterruptedByADeadProcessIsClearedByTheNextSave() throws Exception {
        Path leftover =
                Files.createDirectories(dir.resolve(AtomicCheckpoint.PARTIAL_PREFIX + "ckpt-1"));
        Files.write(leftover.resolve("ckpt-0001.params"), new byte[] {'D', 'J'});
        Path otherModels =
                Files.createDirectories(dir.resolve(AtomicCheckpoint.PARTIAL_PREFIX + "other-1"));
        try (Model model = model()) {
            // no Epoch property: numbered one past the newest in the directory, as Model.save does
            AtomicCheckpoint.save(model, dir, "ckpt");
            AtomicCheckpoint.save(model, dir, "ckpt");
        }
        assertEquals(
                List.of(
                        otherModels.getFileName().toString(),
                        "ckpt-0000.params",
                        "ckpt-0001.params"),
                entries(dir));
    }

    @Test
    void dataParallelSavesThroughTheAtomicListenerWithTheUsersSettings() throws Exception {
        AtomicInteger callbacks = new AtomicInteger();
        SaveModelTrainingListener plain = new SaveModelTrainingListener(dir.toString(), "dp", 1);
        plain.setSaveModelCallback(trainer -> callbacks.incrementAndGet());
        try (Model model = Model.newInstance("atomic");
                NDManager manager = NDManager.newBaseManager()) {
            model.setBlock(Amp.wrap(Linear.builder().setUnits(2).build(), "fp32"));
            // DJL's L2 loss (mul(Number), not GC-safe) is fine here: only the files are checked
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.l2Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build())
                            .addTrainingListeners(plain);
            DataParallelTrainingConfig dp =
                    (DataParallelTrainingConfig)
                            DataParallel.configure(
                                    Amp.configure(config, model.getBlock()), World.local());
            List<TrainingListener> listeners = dp.getTrainingListeners();
            AtomicSaveModelTrainingListener atomic =
                    assertInstanceOf(
                            AtomicSaveModelTrainingListener.class,
                            listeners.stream()
                                    .filter(l -> l instanceof SaveModelTrainingListener)
                                    .findFirst()
                                    .orElseThrow());
            assertNotSame(plain, atomic);
            assertEquals("dp", atomic.getOverrideModelName());
            assertEquals(1, atomic.getCheckpoint());
            assertEquals(dir, atomic.getOutputDir());
            try (Trainer trainer = model.newTrainer(dp)) {
                trainer.initialize(new Shape(4, 3));
                NDArray x = manager.randomNormal(new Shape(8, 3));
                NDArray y = manager.randomNormal(new Shape(8, 2));
                ArrayDataset data =
                        new ArrayDataset.Builder()
                                .setData(x)
                                .optLabels(y)
                                .setSampling(4, false)
                                .build();
                EasyTrain.fit(trainer, 2, data, null);
            }
        }
        // DJL's names and schedule: one checkpoint an epoch, none again at the end; each with its
        // optimizer state
        assertEquals(
                List.of(
                        "dp-0001.optimizer",
                        "dp-0001.params",
                        "dp-0002.optimizer",
                        "dp-0002.params"),
                entries(dir));
        assertEquals(2, callbacks.get());
    }

    @Test
    void afterLoadingEpochThreeTheNextCheckpointIsEpochFour() throws Exception {
        try (Model model = model()) {
            model.setProperty("Epoch", "3");
            AtomicCheckpoint.save(model, dir, "ckpt");
        }
        try (Model model = Model.newInstance("ckpt");
                NDManager manager = NDManager.newBaseManager()) {
            model.setBlock(block());
            model.load(dir, "ckpt");
            // DJL's L2 loss (mul(Number), not GC-safe) is fine here: only the files are checked
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.l2Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build())
                            .addTrainingListeners(
                                    new AtomicSaveModelTrainingListener(dir.toString(), "ckpt", 1));
            try (Trainer trainer = model.newTrainer(config)) {
                ArrayDataset data =
                        new ArrayDataset.Builder()
                                .setData(manager.randomNormal(new Shape(4, 3)))
                                .optLabels(manager.randomNormal(new Shape(4, 4)))
                                .setSampling(4, false)
                                .build();
                EasyTrain.fit(trainer, 1, data, null);
            }
        }
        // DJL's listener would write ckpt-0001 and leave the stale epoch 3 the newest
        assertEquals(List.of("ckpt-0003.params", "ckpt-0004.params"), entries(dir));
    }

    @Test
    void onlyRankZeroLogsAndWritesFiles() {
        String out = dir.toString();
        assertTrue(DataParallelTrainingConfig.rootOnly(new LoggingTrainingListener()));
        assertTrue(DataParallelTrainingConfig.rootOnly(new TimeMeasureTrainingListener(out)));
        assertTrue(DataParallelTrainingConfig.rootOnly(new MemoryTrainingListener(out)));
        assertTrue(DataParallelTrainingConfig.rootOnly(new SaveModelTrainingListener(out)));
        assertTrue(DataParallelTrainingConfig.rootOnly(new AtomicSaveModelTrainingListener(out)));
        assertFalse(DataParallelTrainingConfig.rootOnly(new EvaluatorTrainingListener()));
    }

    private static Model model() {
        Model model = Model.newInstance("ckpt");
        model.setBlock(block());
        model.getBlock().initialize(model.getNDManager(), DataType.FLOAT32, new Shape(2, 3));
        return model;
    }

    private static Block block() {
        return Linear.builder().setUnits(4).build();
    }

    private static List<float[]> weights(Block block) {
        List<float[]> values = new ArrayList<>();
        for (Pair<String, Parameter> pair : block.getParameters()) {
            values.add(pair.getValue().getArray().toFloatArray());
        }
        return values;
    }

    private static List<String> entries(Path directory) throws IOException {
        try (Stream<Path> list = Files.list(directory)) {
            return list.map(p -> p.getFileName().toString()).sorted().collect(Collectors.toList());
        }
    }
}
