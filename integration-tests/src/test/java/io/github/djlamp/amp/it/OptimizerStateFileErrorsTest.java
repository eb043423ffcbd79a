package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Optimizer-state files that do not fit, or are saved where they cannot go, are refused with the
 * reason; one that fits loads, also twice before the first step; saving leaves no partial file.
 */
class OptimizerStateFileErrorsTest {

    @TempDir Path dir;

    @ParameterizedTest
    @EnumSource(
            value = FusedOptimizer.class,
            names = {"OFF", "ON"})
    void aFileForFewerLayersIsRefusedNamingWhatIsMissing(FusedOptimizer path) throws Exception {
        Path file = dir.resolve("two.optimizer");
        try (Rig two = new Rig(2, path)) {
            two.step();
            two.amp().saveOptimizerState(file);
        }
        try (Rig three = new Rig(3, path)) {
            AmpException e =
                    assertThrows(AmpException.class, () -> three.amp().loadOptimizerState(file));
            assertTrue(
                    e.getMessage()
                            .contains(
                                    "has no state for parameters this model trains:"
                                            + " [04Linear_bias, 04Linear_weight]"),
                    e.getMessage());
        }
    }

    @Test
    void aFileForMoreLayersNamesEachUnknownParameterOnce() throws Exception {
        Path file = dir.resolve("three.optimizer");
        try (Rig three = new Rig(3, FusedOptimizer.OFF)) {
            three.step();
            three.amp().saveOptimizerState(file);
        }
        try (Rig two = new Rig(2, FusedOptimizer.OFF)) {
            AmpException e =
                    assertThrows(AmpException.class, () -> two.amp().loadOptimizerState(file));
            assertTrue(
                    e.getMessage().contains("does not have: [04Linear_weight, 04Linear_bias]")
                            || e.getMessage()
                                    .contains("does not have: [04Linear_bias, 04Linear_weight]"),
                    e.getMessage());
        }
    }

    @ParameterizedTest
    @EnumSource(
            value = FusedOptimizer.class,
            names = {"OFF", "ON"})
    void theSameStateLoadsTwiceBeforeTheFirstStep(FusedOptimizer path) throws Exception {
        Path file = dir.resolve("same.optimizer");
        try (Rig saved = new Rig(2, path)) {
            saved.step();
            saved.amp().saveOptimizerState(file);
        }
        try (Rig resumed = new Rig(2, path)) {
            resumed.amp().loadOptimizerState(file);
            assertDoesNotThrow(() -> resumed.amp().loadOptimizerState(file));
            resumed.step();
            AmpException e =
                    assertThrows(AmpException.class, () -> resumed.amp().loadOptimizerState(file));
            assertTrue(e.getMessage().contains("before the trainer's first step"), e.getMessage());
        }
    }

    @Test
    void savingOntoADirectoryIsRefusedAndLeavesNothingBehind() throws Exception {
        Path directory = Files.createDirectory(dir.resolve("adir"));
        try (Rig rig = new Rig(2, FusedOptimizer.OFF)) {
            rig.step();
            AmpException e =
                    assertThrows(AmpException.class, () -> rig.amp().saveOptimizerState(directory));
            assertTrue(e.getMessage().contains("it is a directory"), e.getMessage());
        }
        assertEquals(List.of("adir"), listing());
    }

    @Test
    void twoTrainersSavingToOnePathAtOnceDoNotCollide() throws Exception {
        Path file = dir.resolve("shared.optimizer");
        try (Rig first = new Rig(2, FusedOptimizer.OFF);
                Rig second = new Rig(2, FusedOptimizer.OFF)) {
            first.step();
            second.step();
            ExecutorService pool = Executors.newFixedThreadPool(2);
            try {
                List<Future<Void>> saves = new ArrayList<>();
                for (int round = 0; round < 20; round++) {
                    for (Rig rig : List.of(first, second)) {
                        Callable<Void> save =
                                () -> {
                                    rig.amp().saveOptimizerState(file);
                                    return null;
                                };
                        saves.add(pool.submit(save));
                    }
                }
                for (Future<Void> save : saves) {
                    save.get();
                }
            } finally {
                pool.shutdown();
            }
        }
        assertEquals(List.of("shared.optimizer"), listing(), "no partial file left");
    }

    private List<String> listing() throws Exception {
        try (Stream<Path> files = Files.list(dir)) {
            return files.map(p -> p.getFileName().toString()).sorted().collect(Collectors.toList());
        }
    }

    /**
     * An MLP of 2 linear layers, or the same with a third after them, under fp16 with SGD and
     * momentum, and its trainer.
     */
    private static final class Rig implements AutoCloseable {
        final Model model;
        final Trainer trainer;
        final ToyTask task;
        int steps;

        Rig(int layers, FusedOptimizer path) {
            Engine.getInstance().setRandomSeed(3);
            SequentialBlock net =
                    new SequentialBlock()
                            .add(Linear.builder().setUnits(16).build())
                            .add(Activation.reluBlock())
                            .add(Linear.builder().setUnits(ToyTask.CLASSES).build());
            if (layers == 3) {
                net.add(Linear.builder().setUnits(ToyTask.CLASSES).build()); // 04Linear
            }
            model = Model.newInstance("state-" + layers, "PyTorch");
            MixedPrecisionBlock block = Amp.wrap(net, "mixed_float16");
            model.setBlock(block);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.05f))
                                            .optMomentum(0.9f)
                                            .build());
            trainer =
                    model.newTrainer(
                            Amp.configure(
                                    config,
                                    block,
                                    AmpOptions.builder()
                                            .fusedOptimizer(path)
                                            // small enough that the steps are applied
                                            .lossScaling(
                                                    LossScaling.dynamicBuilder()
                                                            .initScale(64f)
                                                            .build())
                                            .build()));
            trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
            task = new ToyTask(trainer.getManager());
        }

        AmpSession amp() {
            return AmpSession.of(trainer);
        }

        void step() {
            task.trainStep(trainer, steps++);
            assertEquals(0, amp().getScaler().getSkippedSteps(), "the step was applied");
        }

        @Override
        public void close() {
            trainer.close();
            model.close();
        }
    }
}
