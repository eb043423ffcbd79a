package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import ai.djl.Model;
import ai.djl.basicmodelzoo.tabular.TabNet;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingConfig;
import ai.djl.training.loss.TabNetRegressionLoss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.scale.LossScaling;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * DJL's TabNet (TrainAirfoilWithTabNet, tiny) is a composite with a forward of its own: it used to
 * run whole in fp32 (vouching refused in bf16: its feature transformers reach lambdas djl-amp
 * cannot read). Its forward reads no 16-bit array's type into JNI, so it runs whole under
 * libtorch's autocast: its linear layers in 16 bits, its loss as fp32's. A JNI trap reached would
 * end this JVM, failing the run.
 */
class TabNetUnderEngineAutocastTest {

    private static final int STEPS = 4;
    private static final int BATCH = 16;
    private static final int FEATURES = 5;

    @Test
    void tabNetComputesIn16BitsUnderTheEnginesAutocast() {
        CompositeRun fp32 = train(null);
        for (String policy : List.of("mixed_bfloat16", "mixed_float16")) {
            CompositeRun low = train(policy);
            assertNotNull(low.stage(), policy + ": TabNet runs as one engine-autocast stage");
            low.print("TabNet", policy, fp32);
            CompositeRun.assertDecidedRight(
                    policy, fp32, low, () -> train(null), () -> train(policy));
        }
    }

    /**
     * In fp16, GradScaler's first scale of 2^16 overflows the untrained model's gradients and skips
     * the first step (the losses then trail fp32's by one step); a lower first scale, as the README
     * advises, keeps every step.
     */
    private static TrainingConfig configure(
            DefaultTrainingConfig config, MixedPrecisionBlock wrapped, String policy) {
        if (wrapped == null) {
            return config;
        }
        if ("mixed_float16".equals(policy)) {
            return Amp.configure(
                    config, wrapped, LossScaling.dynamicBuilder().initScale(1024f).build());
        }
        return Amp.configure(config, wrapped);
    }

    private static CompositeRun train(String policy) {
        Engine.getInstance().setRandomSeed(13);
        Block block = TabNet.builder().setInputDim(FEATURES).setOutDim(1).optNumSteps(2).build();
        MixedPrecisionBlock wrapped = policy == null ? null : Amp.wrap(block, policy);
        DefaultTrainingConfig config =
                new DefaultTrainingConfig(new TabNetRegressionLoss())
                        .optOptimizer(
                                Optimizer.adam()
                                        .optLearningRateTracker(Tracker.fixed(1e-3f))
                                        .build());
        try (Model model = Model.newInstance("tabnet", "PyTorch");
                NDManager data = NDManager.newBaseManager("PyTorch")) {
            model.setBlock(wrapped == null ? block : wrapped);
            try (Trainer trainer = model.newTrainer(configure(config, wrapped, policy))) {
                Engine.getInstance().setRandomSeed(13);
                NDArray x = data.randomNormal(new Shape(BATCH, FEATURES));
                NDArray y = x.sum(new int[] {1}, true).mul(0.5f);
                trainer.initialize(x.getShape());
                return CompositeRun.train(trainer, wrapped, data, new NDList(x), y, BATCH, STEPS);
            }
        }
    }
}
