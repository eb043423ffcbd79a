package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.train.AmpSession;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The loss scale that backward reads is an array djl-amp keeps. Scaling by a Java number ({@code
 * loss.mul(scale)}) made DJL's engine build an array over a Java buffer and drop it at once, while
 * autograd kept it for backward; on the CPU a garbage collection between the scale and backward
 * freed that memory, and backward seeded every gradient with whatever was written there next (here:
 * 1.4e-45 or 7 instead of 65536).
 */
class ScaledLossSurvivesGarbageCollectionTest {

    @Test
    void gradientsAreRightWhenTheJvmCollectsBetweenScaleAndBackward() throws Exception {
        float[] plain = gradient(null, false);
        float[] scaled = gradient("mixed_float16", true);
        for (int i = 0; i < plain.length; i++) {
            assertEquals(
                    plain[i], scaled[i], 1e-2 * Math.max(1, Math.abs(plain[i])), "[" + i + "]");
        }
    }

    /** The weight's gradient of one L1 step, unscaled; with a collection before backward. */
    private static float[] gradient(String policy, boolean collect) throws Exception {
        Engine.getInstance().setRandomSeed(3);
        Block block = Linear.builder().setUnits(2).build();
        try (Model model = Model.newInstance("scaled", "PyTorch");
                NDManager data = NDManager.newBaseManager("PyTorch")) {
            model.setBlock(policy == null ? block : Amp.wrap(block, policy));
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.l1Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build());
            AmpOptions options = AmpOptions.builder().fusedOptimizer(FusedOptimizer.OFF).build();
            try (Trainer trainer =
                    model.newTrainer(
                            policy == null
                                    ? config
                                    : Amp.configure(config, model.getBlock(), options))) {
                trainer.initialize(new Shape(4, 3));
                NDArray x = data.ones(new Shape(4, 3));
                NDArray y = data.zeros(new Shape(4, 2));
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    // trainer.getLoss() of a configured trainer scales the loss for backward
                    NDArray loss =
                            trainer.getLoss()
                                    .evaluate(new NDList(y), trainer.forward(new NDList(x)));
                    if (collect) {
                        collectAndReuseFreedMemory();
                    }
                    collector.backward(loss);
                }
                if (policy != null) {
                    AmpSession.of(trainer).unscaleGradients();
                }
                return block.getParameters()
                        .get(0)
                        .getValue()
                        .getArray()
                        .getGradient()
                        .toFloatArray();
            }
        }
    }

    /** Runs the collector and fills small freed native blocks with 7s. */
    private static void collectAndReuseFreedMemory() throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(100);
        }
        List<ByteBuffer> filler = new ArrayList<>();
        for (int i = 0; i < 100_000; i++) {
            filler.add(ByteBuffer.allocateDirect(4).order(ByteOrder.nativeOrder()).putFloat(0, 7f));
        }
        filler.clear();
    }
}
