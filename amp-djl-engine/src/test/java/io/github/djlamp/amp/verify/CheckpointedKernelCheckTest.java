package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.pytorch.GcSafe;
import io.github.djlamp.amp.train.AmpSession;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A checkpointed segment's forward runs without recording, where the inputs of its inner layers
 * need no gradient; its recomputation then runs their input-gradient kernels. The kernel check made
 * in that forward covers them: a wrong 16-bit input gradient inside a segment is found as it is
 * without checkpointing.
 */
class CheckpointedKernelCheckTest {

    private static final Shape INPUT = new Shape(4, 1, 12, 12);
    private static final String WRONG = "02WrongInputGradientConv2d";

    @BeforeEach
    void forgetVerdicts() {
        KernelVerdicts.forgetAll();
    }

    @Test
    void aWrongInputGradientInsideASegmentIsFoundAsWithoutCheckpointing() {
        KernelVerdict plain = verdictAfterOneStep(Checkpointing.none());
        assertEquals(KernelVerdict.Outcome.FP32_FALLBACK, plain.getOutcome(), plain.toString());
        KernelVerdicts.forgetAll();
        // one segment of the two convolutions: the wrong one's input is made inside it
        KernelVerdict checkpointed = verdictAfterOneStep(Checkpointing.every(2));
        assertEquals(
                KernelVerdict.Outcome.FP32_FALLBACK,
                checkpointed.getOutcome(),
                checkpointed.toString());
    }

    private static KernelVerdict verdictAfterOneStep(Checkpointing checkpointing) {
        Engine.getInstance().setRandomSeed(3);
        try (Model model = Model.newInstance("checkpointed-check", "PyTorch")) {
            SequentialBlock net =
                    new SequentialBlock()
                            .add(
                                    Conv2d.builder()
                                            .setFilters(8)
                                            .setKernelShape(new Shape(3, 3))
                                            .optPadding(new Shape(1, 1))
                                            .build())
                            .add(WrongInputGradientConv2d.create(8, 3, 1))
                            .add(Blocks.batchFlattenBlock())
                            .add(Linear.builder().setUnits(10).build());
            MixedPrecisionBlock wrapped = Amp.wrap(net, "mixed_bfloat16");
            model.setBlock(wrapped);
            AmpOptions options =
                    AmpOptions.builder()
                            .checkpointing(checkpointing)
                            .fusedOptimizer(FusedOptimizer.OFF)
                            .build();
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(GcSafe.l2Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.05f))
                                            .build());
            try (Trainer trainer = model.newTrainer(Amp.configure(config, wrapped, options))) {
                trainer.initialize(INPUT);
                NDManager manager = trainer.getManager();
                NDArray x = manager.randomNormal(0, 1, INPUT, DataType.FLOAT32);
                NDArray y = manager.randomNormal(0, 1, new Shape(4, 10), DataType.FLOAT32);
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    NDList prediction = trainer.forward(new NDList(x));
                    collector.backward(trainer.getLoss().evaluate(new NDList(y), prediction));
                }
                AmpSession.of(trainer).step();
                for (KernelVerdict verdict : wrapped.getKernelVerdicts()) {
                    if (verdict.getPaths().contains(WRONG)) {
                        return verdict;
                    }
                }
                throw new AssertionError(
                        "no kernel verdict names " + WRONG + ": " + wrapped.getKernelVerdicts());
            }
        }
    }
}
