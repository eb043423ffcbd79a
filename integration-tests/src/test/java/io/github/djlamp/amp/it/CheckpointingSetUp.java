package io.github.djlamp.amp.it;

import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.scale.LossScaling;

/** The set-up the checkpointing tests share, so that each compares only what it varies. */
final class CheckpointingSetUp {

    private CheckpointingSetUp() {}

    /**
     * Options with {@code checkpointing}, DJL's per-parameter update and, for {@code
     * mixed_float16}, dynamic loss scaling from 256 (small enough for these networks' gradients).
     */
    static AmpOptions.Builder options(String policy, Checkpointing checkpointing) {
        return AmpOptions.builder()
                .checkpointing(checkpointing)
                .fusedOptimizer(FusedOptimizer.OFF)
                .lossScaling(
                        policy.equals("mixed_float16")
                                ? LossScaling.dynamicBuilder().initScale(256f).build()
                                : null);
    }

    /** Softmax cross-entropy with plain SGD at a fixed learning rate. */
    static DefaultTrainingConfig sgd(float learningRate) {
        return new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                .optOptimizer(
                        Optimizer.sgd()
                                .setLearningRateTracker(Tracker.fixed(learningRate))
                                .build());
    }
}
