package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import ai.djl.Model;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.train.AmpSession;
import java.util.Map;
import java.util.function.Predicate;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 44 item 2: a custom loop of ResNet-20 with SGD and momentum that, before its second step,
 * runs a training-mode forward on the step's batch with no gradient collector open (a loss logged
 * by hand). In plain DJL that forward moves BatchNorm's running statistics once and nothing else.
 * Its 16-bit weight casts were cached for the step and reused by the step's own forward, but made
 * while autograd did not record, so no gradient reached the fp32 masters of the layers that read
 * them: the run without checkpointing (whose every layer reads the cache) trained otherwise, and
 * the checkpointed run (whose segments cast afresh) ended elsewhere.
 */
class MonitoringForwardBeforeStepTest {

    private static final Shape IMAGE = new Shape(1, 16, 16);
    private static final int BATCH = 16;
    private static final int STEPS = 4;
    private static final int LOOKED_AT_STEP = 1;

    private static final Predicate<Parameter> RUNNING_STATISTICS =
            p ->
                    p.getType() == Parameter.Type.RUNNING_MEAN
                            || p.getType() == Parameter.Type.RUNNING_VAR;

    /** The parameters after training: those the optimizer trains and BatchNorm's statistics. */
    private record Trained(
            Map<String, Snapshots.Bits> parameters, Map<String, Snapshots.Bits> statistics) {}

    /** Trains {@link #STEPS} steps, looking before step {@link #LOOKED_AT_STEP} when asked. */
    private static Trained train(String policy, Checkpointing checkpointing, boolean look) {
        Engine.getInstance().setRandomSeed(5);
        try (Model model = Model.newInstance("monitoring-forward", "PyTorch")) {
            MixedPrecisionBlock block =
                    Amp.wrap(
                            ResNetV1.builder()
                                    .setImageShape(IMAGE)
                                    .setNumLayers(20)
                                    .setOutSize(10)
                                    .build(),
                            policy);
            model.setBlock(block);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .optMomentum(0.9f)
                                            .build());
            try (Trainer trainer =
                    model.newTrainer(
                            Amp.configure(
                                    config,
                                    block,
                                    CheckpointingSetUp.options(policy, checkpointing)
                                            .fusedOptimizer(FusedOptimizer.AUTO)
                                            .build()))) {
                Shape batchShape = new Shape(BATCH).addAll(IMAGE);
                trainer.initialize(batchShape);
                for (int i = 0; i < STEPS; i++) {
                    try (NDManager step = trainer.getManager().newSubManager()) {
                        NDArray x =
                                step.arange((float) batchShape.size())
                                        .reshape(batchShape)
                                        .div(37f + i)
                                        .sin();
                        NDArray y = step.arange((float) BATCH).add(i).mod(10f);
                        if (look && i == LOOKED_AT_STEP) {
                            trainer.getLoss()
                                    .evaluate(new NDList(y), trainer.forward(new NDList(x)))
                                    .getFloat();
                        }
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            NDArray loss =
                                    trainer.getLoss()
                                            .evaluate(
                                                    new NDList(y), trainer.forward(new NDList(x)));
                            loss.getFloat();
                            collector.backward(loss);
                        }
                        AmpSession.of(trainer).step();
                    }
                }
                return new Trained(
                        Snapshots.weights(block, RUNNING_STATISTICS.negate()),
                        Snapshots.weights(block, RUNNING_STATISTICS));
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"mixed_bfloat16", "mixed_float16"})
    void theLookMovesOnlyTheRunningStatisticsWithOrWithoutCheckpointing(String policy) {
        Trained unlooked = train(policy, Checkpointing.none(), false);
        Trained plain = train(policy, Checkpointing.none(), true);
        Trained checkpointed = train(policy, Checkpointing.stages(), true);
        assertEquals(
                plain.parameters(),
                checkpointed.parameters(),
                policy + ": checkpointed against plain, trained parameters");
        assertEquals(
                plain.statistics(),
                checkpointed.statistics(),
                policy + ": checkpointed against plain, running statistics");
        assertEquals(
                unlooked.parameters(),
                plain.parameters(),
                policy + ": the look changes no trained parameter");
        assertNotEquals(
                unlooked.statistics(),
                plain.statistics(),
                policy + ": the look moves BatchNorm's running statistics, as in plain DJL");
    }
}
