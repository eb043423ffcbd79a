package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.cast.PrecisionSummary;
import io.github.djlamp.amp.diagnostics.AlignmentReport;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.pytorch.GcSafe;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A model whose stem has a wrong 16-bit kernel (a test double of a broken platform): djl-amp finds
 * it at the first forward and runs that layer in fp32, so the model computes what fp32 computes;
 * with verification off the wrong kernel's result is used, which is what this test would see if the
 * fallback were removed.
 */
class KernelFallbackTest {

    private static final Shape INPUT = new Shape(4, 1, 12, 12);

    @BeforeEach
    void forgetVerdicts() {
        KernelVerdicts.forgetAll();
    }

    @Test
    void aWrongStemFallsBackToFp32AndTheModelMatchesFp32() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            SequentialBlock net = net(manager);
            NDArray x = manager.randomNormal(0, 1, INPUT, DataType.FLOAT32);
            float[] expected = forward(net, x, manager);
            MixedPrecisionBlock wrapped = Amp.wrap(net, "mixed_bfloat16");
            float[] actual = forward(wrapped, x, manager);
            assertClose(expected, actual, "the stem fell back to fp32, the rest is bf16");
            List<KernelVerdict> verdicts = wrapped.getKernelVerdicts();
            KernelVerdict stem = verdicts.get(0);
            assertEquals(KernelVerdict.Outcome.FP32_FALLBACK, stem.getOutcome(), stem.toString());
            assertEquals(List.of("01WrongLowPrecisionConv2d"), stem.getPaths());
            for (KernelVerdict verdict : verdicts.subList(1, verdicts.size())) {
                assertEquals(
                        KernelVerdict.Outcome.VERIFIED, verdict.getOutcome(), verdict.toString());
            }
            assertEquals(3, verdicts.size(), "the stem, the 3x3 conv and the linear layer");

            PrecisionSummary.Row stemRow =
                    wrapped.getPrecisionSummary(manager.getDevice(), manager).getRows().get(0);
            assertEquals("01WrongLowPrecisionConv2d", stemRow.getPath());
            assertEquals(CastCategory.FP32, stemRow.getCategory(), stemRow.getReason());
            assertTrue(stemRow.getReason().contains("FP32_FALLBACK"), stemRow.getReason());
            String alignment = AlignmentReport.of(wrapped, INPUT).toTable();
            assertTrue(
                    alignment.contains(
                            "Kernel checks: 3 16-bit kernel signatures checked against"
                                    + " fp32, 1 wrong"),
                    alignment);
            assertTrue(
                    alignment.contains("01WrongLowPrecisionConv2d: WrongLowPrecisionConv2d"),
                    alignment);
        }
    }

    @Test
    void withVerificationOffTheWrongKernelIsUsed() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            SequentialBlock net = net(manager);
            NDArray x = manager.randomNormal(0, 1, INPUT, DataType.FLOAT32);
            float[] expected = forward(net, x, manager);
            MixedPrecisionBlock trusting = Amp.wrap(net, "mixed_bfloat16", KernelVerification.OFF);
            float[] actual = forward(trusting, x, manager);
            assertTrue(
                    maxRelativeError(expected, actual) > 0.1,
                    "the double's 16-bit kernel is wrong, so trusting it must show");
            assertTrue(trusting.getKernelVerdicts().isEmpty());
        }
    }

    @Test
    void trainingWithTheFallbackMatchesFp32Training() {
        float[] fp32 = train("float32");
        float[] amp = train("mixed_bfloat16");
        assertClose(fp32, amp, "weights after 3 SGD steps");
    }

    private static float[] train(String policy) {
        Engine.getInstance().setRandomSeed(3);
        try (Model model = Model.newInstance("fallback", "PyTorch")) {
            SequentialBlock net = bareNet();
            MixedPrecisionBlock wrapped = Amp.wrap(net, policy);
            model.setBlock(wrapped);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(GcSafe.l2Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.05f))
                                            .build());
            try (Trainer trainer = model.newTrainer(Amp.configure(config, wrapped))) {
                trainer.initialize(INPUT);
                NDManager manager = trainer.getManager();
                NDArray x = manager.randomNormal(0, 1, INPUT, DataType.FLOAT32);
                NDArray y = manager.randomNormal(0, 1, new Shape(4, 10), DataType.FLOAT32);
                for (int step = 0; step < 3; step++) {
                    try (GradientCollector collector = trainer.newGradientCollector()) {
                        NDArray prediction = trainer.forward(new NDList(x)).singletonOrThrow();
                        collector.backward(
                                trainer.getLoss().evaluate(new NDList(y), new NDList(prediction)));
                    }
                    trainer.step();
                }
                return net.getChildren()
                        .get(0)
                        .getValue()
                        .getParameters()
                        .get(0)
                        .getValue()
                        .getArray()
                        .toFloatArray();
            }
        }
    }

    private static SequentialBlock net(NDManager manager) {
        Engine.getInstance().setRandomSeed(7);
        SequentialBlock net = bareNet();
        net.initialize(manager, DataType.FLOAT32, INPUT);
        return net;
    }

    private static SequentialBlock bareNet() {
        return new SequentialBlock()
                .add(WrongLowPrecisionConv2d.create(8, 5, 2))
                .add(Activation.reluBlock())
                .add(
                        Conv2d.builder()
                                .setFilters(8)
                                .setKernelShape(new Shape(3, 3))
                                .optPadding(new Shape(1, 1))
                                .build())
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(10).build());
    }

    private static float[] forward(ai.djl.nn.Block block, NDArray x, NDManager manager) {
        return block.forward(new ParameterStore(manager, false), new NDList(x), false)
                .singletonOrThrow()
                .toFloatArray();
    }

    private static double maxRelativeError(float[] expected, float[] actual) {
        double scale = 0;
        double worst = 0;
        for (int i = 0; i < expected.length; i++) {
            scale = Math.max(scale, Math.abs(expected[i]));
            worst = Math.max(worst, Math.abs(expected[i] - actual[i]));
        }
        return worst / scale;
    }

    private static void assertClose(float[] expected, float[] actual, String what) {
        assertEquals(expected.length, actual.length);
        double error = maxRelativeError(expected, actual);
        assertTrue(error < 0.03, what + ": max error " + error + " of the output's scale");
    }
}
