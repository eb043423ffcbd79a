package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Nag;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.LossScalingOptimizer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 44 item 1: a whole training run of DJL's {@code Nag} on djl-amp's fused step, step by step,
 * against MXNet's {@code nag_mom_update} ({@link MxnetNagMomUpdate}) advanced on the host from the
 * gradients the run computed: the issue's MLP (Linear 32, ReLU, Linear 4 on 16 features, batches of
 * 16, rate 0.05, momentum 0.9), every parameter after every step, with and without weight decay,
 * clipping and rescaling, with a schedule and a begin offset. DJL's PyTorch engine has no Nag
 * update, so the kernel in Java is the reference.
 */
class FusedNagTrainingTest {

    private static final int FEATURES = 16;
    private static final int CLASSES = 4;
    private static final int BATCH = 16;
    private static final int STEPS = 8;
    private static final float MOMENTUM = 0.9f;
    private static final float RATE = 0.05f;

    /** DJL's Nag settings and the same ones for the host's kernel. */
    private record Settings(Tracker rate, float wd, float rescale, float clip, int beginNumUpdate) {
        Nag build() {
            Nag.Builder builder =
                    Optimizer.nag()
                            .setLearningRateTracker(rate)
                            .setMomentum(MOMENTUM)
                            .optWeightDecays(wd)
                            .setRescaleGrad(rescale)
                            .optBeginNumUpdate(beginNumUpdate);
            if (clip >= 0f) {
                builder.optClipGrad(clip);
            }
            return builder.build();
        }
    }

    private static final Settings PLAIN = new Settings(Tracker.fixed(RATE), 0f, 1f, -1f, 0);

    private static final Settings DECAY_CLIP_RESCALE =
            new Settings(Tracker.fixed(RATE), 0.01f, 0.33f, 0.05f, 0);

    /** A rate that changes at every update, so that a count off by one shows. */
    private static final Settings SCHEDULED =
            new Settings(n -> RATE * (1f + (n % 3)) / (1f + 0.1f * n), 0.01f, 0.5f, 0.1f, 2);

    /** Host copies of every trained parameter and MXNet's momentum for each. */
    private static final class HostKernel {
        final List<float[]> weights = new ArrayList<>();
        final List<float[]> moms = new ArrayList<>();
        final Settings settings;
        int applied;

        HostKernel(List<float[]> initial, Settings settings) {
            this.settings = settings;
            for (float[] w : initial) {
                weights.add(w.clone());
                moms.add(new float[w.length]);
            }
        }

        void step(List<float[]> grads) {
            applied++;
            float lr = settings.rate().getNewValue(settings.beginNumUpdate() + applied);
            for (int p = 0; p < weights.size(); p++) {
                MxnetNagMomUpdate.update(
                        weights.get(p),
                        grads.get(p),
                        moms.get(p),
                        lr,
                        MOMENTUM,
                        settings.wd(),
                        settings.rescale(),
                        settings.clip());
            }
        }
    }

    @Test
    void theIssuesSettingsTrainAsMxnetsKernelInFp32() {
        trainAgainstTheKernel("float32", PLAIN);
    }

    @ParameterizedTest
    @ValueSource(strings = {"float32", "mixed_bfloat16", "mixed_float16"})
    void decayClippingAndRescalingTrainAsMxnetsKernel(String policy) {
        trainAgainstTheKernel(policy, DECAY_CLIP_RESCALE);
    }

    @Test
    void aScheduleWithABeginOffsetTrainsAsMxnetsKernel() {
        trainAgainstTheKernel("float32", SCHEDULED);
    }

    /**
     * Trains {@link #STEPS} custom-loop steps fused; before each step reads every gradient (after
     * the unscale; {@code trainer.getLoss()} scales the loss), advances the host's kernel with it,
     * and after the step compares every weight.
     */
    private static void trainAgainstTheKernel(String policy, Settings settings) {
        Engine.getInstance().setRandomSeed(44);
        SequentialBlock mlp =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(32).build())
                        .add(Activation.reluBlock())
                        .add(Linear.builder().setUnits(CLASSES).build());
        try (Model model = Model.newInstance("fused-nag", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(mlp, policy);
            model.setBlock(block);
            AmpTrainingConfig config =
                    Amp.configure(
                            new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                                    .optOptimizer(settings.build()),
                            block,
                            AmpOptions.builder().fusedOptimizer(FusedOptimizer.ON).build());
            try (Trainer trainer = model.newTrainer(config)) {
                trainer.initialize(new Shape(BATCH, FEATURES));
                assertTrue(((LossScalingOptimizer) config.getOptimizer()).isFused(), "fused");
                AmpSession amp = AmpSession.of(trainer);
                List<Parameter> trained = new ArrayList<>();
                for (Pair<String, Parameter> pair : mlp.getParameters()) {
                    trained.add(pair.getValue());
                }
                HostKernel kernel = new HostKernel(values(trained), settings);
                for (int step = 0; step < STEPS; step++) {
                    try (NDManager batch = trainer.getManager().newSubManager()) {
                        NDArray x = batch.randomNormal(new Shape(BATCH, FEATURES));
                        NDArray y =
                                x.get(":, 0:" + CLASSES).argMax(1).toType(x.getDataType(), false);
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            NDArray loss =
                                    trainer.getLoss()
                                            .evaluate(
                                                    new NDList(y), trainer.forward(new NDList(x)));
                            collector.backward(loss);
                        }
                        amp.unscaleGradients();
                        boolean skipping = amp.isSkipping();
                        List<float[]> grads = gradients(trained);
                        amp.step();
                        if (!skipping) {
                            kernel.step(grads);
                        }
                    }
                    assertWeights(kernel.weights, values(trained), policy, step);
                }
                assertTrue(kernel.applied >= STEPS - 1, "at most one step skipped");
            }
        }
    }

    private static List<float[]> values(List<Parameter> parameters) {
        List<float[]> result = new ArrayList<>();
        for (Parameter parameter : parameters) {
            result.add(parameter.getArray().toFloatArray());
        }
        return result;
    }

    private static List<float[]> gradients(List<Parameter> parameters) {
        List<float[]> result = new ArrayList<>();
        for (Parameter parameter : parameters) {
            try (NDArray gradient = parameter.getArray().getGradient()) {
                result.add(gradient.toFloatArray());
            }
        }
        return result;
    }

    private static void assertWeights(
            List<float[]> expected, List<float[]> actual, String policy, int step) {
        for (int p = 0; p < expected.size(); p++) {
            for (int i = 0; i < expected.get(p).length; i++) {
                float want = expected.get(p)[i];
                assertEquals(
                        want,
                        actual.get(p)[i],
                        1e-5f * Math.max(1f, Math.abs(want)),
                        policy + ", after step " + (step + 1) + ", parameter " + p + "[" + i + "]");
            }
        }
    }
}
