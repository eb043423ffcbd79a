package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.FusedOptimizerStep;
import io.github.djlamp.amp.spi.GradientAdjustment;
import io.github.djlamp.amp.spi.LearningRate;
import io.github.djlamp.amp.spi.UpdateCounter;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The fused, device-skipping optimizer steps against DJL's own optimizers: the same weights over
 * several steps to within rounding, and a skipped step that changes nothing.
 */
class FusedOptimizerStepTest {

    private static final Shape[] SHAPES = {new Shape(4, 3), new Shape(3), new Shape(2, 2, 2)};
    private static final int STEPS = 6;
    private static final float LR = 0.05f;
    private static final float WD = 0.01f;

    private NDManager manager;
    private AmpBackend backend;
    private Random random;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager("PyTorch");
        backend = AmpBackends.forManager(manager);
        random = new Random(42);
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    private NDList randomArrays() {
        NDList arrays = new NDList();
        for (Shape shape : SHAPES) {
            float[] values = new float[(int) shape.size()];
            for (int i = 0; i < values.length; i++) {
                values[i] = (float) random.nextGaussian();
            }
            arrays.add(manager.create(values, shape));
        }
        return arrays;
    }

    private static NDList copies(NDList arrays) {
        NDList result = new NDList();
        for (NDArray array : arrays) {
            result.add(array.duplicate());
        }
        return result;
    }

    private static NDList zerosLike(NDList arrays) {
        NDList result = new NDList();
        for (NDArray array : arrays) {
            result.add(array.zerosLike());
        }
        return result;
    }

    /** Runs DJL's optimizer and the fused step side by side on the same gradients. */
    private void assertMatchesDjl(Optimizer djl, FusedStep fused) {
        assertMatchesDjl(djl, fused, STEPS);
    }

    private void assertMatchesDjl(Optimizer djl, FusedStep fused, int steps) {
        NDList djlWeights = randomArrays();
        NDList fusedWeights = copies(djlWeights);
        NDArray clean = manager.zeros(new Shape());
        for (int step = 0; step < steps; step++) {
            NDList grads = randomArrays();
            NDList fusedGrads = copies(grads);
            for (int i = 0; i < djlWeights.size(); i++) {
                djl.update("p" + i, djlWeights.get(i), grads.get(i));
            }
            fused.step(fusedWeights, fusedGrads, clean);
            for (int i = 0; i < djlWeights.size(); i++) {
                float[] expected = djlWeights.get(i).toFloatArray();
                float[] actual = fusedWeights.get(i).toFloatArray();
                for (int j = 0; j < expected.length; j++) {
                    assertEquals(
                            expected[j],
                            actual[j],
                            1e-6f * Math.max(1f, Math.abs(expected[j])),
                            "step " + step + ", weight " + i + ", element " + j);
                }
                assertEquals(0f, fusedGrads.get(i).abs().sum().getFloat(), "grads zeroed");
            }
        }
    }

    @FunctionalInterface
    private interface FusedStep {
        void step(NDList weights, NDList grads, NDArray foundInf);
    }

    /** DJL's update count for the test's weights, every one trained at every step. */
    private UpdateCounter counter(int beginNumUpdate) {
        return new UpdateCounter(
                manager.zeros(new Shape(SHAPES.length), DataType.FLOAT64),
                manager.ones(new Shape(SHAPES.length), DataType.FLOAT64),
                manager.zeros(new Shape(), DataType.FLOAT64),
                beginNumUpdate);
    }

    /** amp-core's fused SGD step: kernel "sgd" with its momentum, one buffer list with momentum. */
    private void sgdStep(
            NDList weights,
            NDList grads,
            NDList momentumBuffers,
            LearningRate rate,
            float weightDecay,
            float momentum,
            GradientAdjustment adjustment,
            UpdateCounter counter,
            NDArray foundInf) {
        sgdFamilyStep(
                "sgd",
                weights,
                grads,
                momentumBuffers,
                rate,
                weightDecay,
                momentum,
                adjustment,
                counter,
                foundInf);
    }

    private void sgdFamilyStep(
            String kernel,
            NDList weights,
            NDList grads,
            NDList momentumBuffers,
            LearningRate rate,
            float weightDecay,
            float momentum,
            GradientAdjustment adjustment,
            UpdateCounter counter,
            NDArray foundInf) {
        FusedOptimizerStep.Builder step =
                FusedOptimizerStep.builder(kernel)
                        .setting("momentum", momentum)
                        .parameters(weights, grads)
                        .weightDecay(weightDecay)
                        .learningRate(rate)
                        .adjustment(adjustment)
                        .counter(counter)
                        .foundInf(foundInf);
        if (!momentumBuffers.isEmpty()) {
            step.state(momentumBuffers);
        }
        backend.fusedStep(step.build());
    }

    /** The settings of amp-core's fused Adam and AdamW steps. */
    private record AdamSettings(
            float beta1, float beta2, float epsilon, float weightDecay, boolean decoupled) {}

    /** amp-core's fused Adam or AdamW step: kernel "adam" or "adamw", the two moments. */
    private void adamStep(
            NDList weights,
            NDList grads,
            NDList means,
            NDList variances,
            LearningRate rate,
            AdamSettings settings,
            GradientAdjustment adjustment,
            UpdateCounter counter,
            NDArray foundInf) {
        backend.fusedStep(
                FusedOptimizerStep.builder(settings.decoupled() ? "adamw" : "adam")
                        .setting("beta1", settings.beta1())
                        .setting("beta2", settings.beta2())
                        .setting("epsilon", settings.epsilon())
                        .parameters(weights, grads)
                        .state(means)
                        .state(variances)
                        .weightDecay(settings.weightDecay())
                        .learningRate(rate)
                        .adjustment(adjustment)
                        .counter(counter)
                        .foundInf(foundInf)
                        .build());
    }

    private FusedStep sgd(float momentum) {
        return sgd(momentum, LearningRate.fixed(LR), GradientAdjustment.NONE, counter(0));
    }

    private FusedStep sgd(
            float momentum,
            LearningRate rate,
            GradientAdjustment adjustment,
            UpdateCounter counter) {
        NDList[] buffers = new NDList[1];
        return (weights, grads, found) -> {
            if (buffers[0] == null) {
                buffers[0] = momentum == 0f ? new NDList() : zerosLike(weights);
            }
            sgdStep(weights, grads, buffers[0], rate, WD, momentum, adjustment, counter, found);
        };
    }

    private FusedStep adam(boolean decoupled, UpdateCounter counter) {
        return adam(decoupled, counter, LearningRate.fixed(LR), GradientAdjustment.NONE);
    }

    private FusedStep adam(
            boolean decoupled,
            UpdateCounter counter,
            LearningRate rate,
            GradientAdjustment adjustment) {
        NDList[] moments = new NDList[2];
        AdamSettings settings = new AdamSettings(0.9f, 0.999f, 1e-8f, WD, decoupled);
        return (weights, grads, found) -> {
            if (moments[0] == null) {
                moments[0] = zerosLike(weights);
                moments[1] = zerosLike(weights);
            }
            adamStep(
                    weights,
                    grads,
                    moments[0],
                    moments[1],
                    rate,
                    settings,
                    adjustment,
                    counter,
                    found);
        };
    }

    /** A rate that changes at every step, so that a step count off by one shows. */
    private static final Tracker SCHEDULE = n -> LR * (1f + (n % 5)) / (1f + n * 0.1f);

    private static final float RESCALE = 0.5f;
    private static final float CLIP = 0.3f;
    private static final int BEGIN = 3;

    /** DJL's tracker for counts {@code begin + 1 ...}, as the device table of a fused step. */
    private LearningRate scheduleTable(int begin) {
        return scheduleTable(begin, STEPS);
    }

    private LearningRate scheduleTable(int begin, int steps) {
        float[] rates = new float[steps + 2];
        for (int i = 0; i < rates.length; i++) {
            rates[i] = SCHEDULE.getNewValue(begin + i + 1);
        }
        return LearningRate.perUpdateCount(manager.create(rates), begin + 1);
    }

    @ParameterizedTest
    @ValueSource(floats = {0f, 0.9f})
    void sgdMatchesDjlsSgd(float momentum) {
        Optimizer djl =
                Optimizer.sgd()
                        .setLearningRateTracker(Tracker.fixed(LR))
                        .optMomentum(momentum)
                        .optWeightDecays(WD)
                        .build();
        assertMatchesDjl(djl, sgd(momentum));
    }

    @ParameterizedTest
    @ValueSource(floats = {0f, 0.9f})
    void sgdWithAScheduleRescaleClipAndBeginOffsetMatchesDjlsSgd(float momentum) {
        Optimizer djl =
                Optimizer.sgd()
                        .setLearningRateTracker(SCHEDULE)
                        .optMomentum(momentum)
                        .optWeightDecays(WD)
                        .setRescaleGrad(RESCALE)
                        .optClipGrad(CLIP)
                        .optBeginNumUpdate(BEGIN)
                        .build();
        assertMatchesDjl(
                djl,
                sgd(
                        momentum,
                        scheduleTable(BEGIN),
                        new GradientAdjustment(RESCALE, CLIP),
                        counter(BEGIN)));
    }

    @Test
    void adamMatchesDjlsAdam() {
        Optimizer djl =
                Optimizer.adam()
                        .optLearningRateTracker(Tracker.fixed(LR))
                        .optWeightDecays(WD)
                        .build();
        UpdateCounter counter = counter(0);
        assertMatchesDjl(djl, adam(false, counter));
        assertEquals(STEPS, counter.getCount().getDouble(), "DJL's update count");
    }

    @Test
    void adamWMatchesDjlsAdamW() {
        Optimizer djl =
                Optimizer.adamW()
                        .optLearningRateTracker(Tracker.fixed(LR))
                        .optWeightDecays(WD)
                        .build();
        assertMatchesDjl(djl, adam(true, counter(0)));
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void adamWithAScheduleRescaleClipAndBeginOffsetMatchesDjlsAdam(boolean decoupled) {
        Optimizer djl =
                decoupled
                        ? Optimizer.adamW()
                                .optLearningRateTracker(SCHEDULE)
                                .optWeightDecays(WD)
                                .setRescaleGrad(RESCALE)
                                .optClipGrad(CLIP)
                                .optBeginNumUpdate(BEGIN)
                                .build()
                        : Optimizer.adam()
                                .optLearningRateTracker(SCHEDULE)
                                .optWeightDecays(WD)
                                .setRescaleGrad(RESCALE)
                                .optClipGrad(CLIP)
                                .optBeginNumUpdate(BEGIN)
                                .build();
        UpdateCounter counter = counter(BEGIN);
        assertMatchesDjl(
                djl,
                adam(
                        decoupled,
                        counter,
                        scheduleTable(BEGIN),
                        new GradientAdjustment(RESCALE, CLIP)));
        assertEquals(BEGIN + STEPS, counter.getCount().getDouble(), "DJL's update count");
    }

    private static NDList snapshot(NDList arrays) {
        return copies(arrays);
    }

    private static void assertBitwiseEqual(NDList before, NDList after, String what) {
        for (int i = 0; i < before.size(); i++) {
            assertArrayEquals(
                    before.get(i).toByteArray(), after.get(i).toByteArray(), what + " " + i);
        }
    }

    private NDList nonFiniteGrads() {
        NDList grads = randomArrays();
        grads.set(0, grads.get(0).add(Float.NaN));
        grads.set(1, grads.get(1).add(Float.POSITIVE_INFINITY));
        return grads;
    }

    private void assertZeroed(NDList grads) {
        for (NDArray grad : grads) {
            assertArrayEquals(new float[(int) grad.size()], grad.toFloatArray(), "grad cleared");
        }
    }

    @ParameterizedTest
    @ValueSource(floats = {0f, 0.9f})
    void aSkippedSgdStepChangesNothingAndClearsTheGradients(float momentum) {
        NDList weights = randomArrays();
        NDList buffers = momentum == 0f ? new NDList() : zerosLike(weights);
        NDArray clean = manager.zeros(new Shape());
        UpdateCounter step = counter(0);
        LearningRate rate = scheduleTable(0);
        GradientAdjustment adjustment = new GradientAdjustment(RESCALE, CLIP);
        sgdStep(weights, randomArrays(), buffers, rate, WD, momentum, adjustment, step, clean);
        NDList weightsBefore = snapshot(weights);
        NDList buffersBefore = snapshot(buffers);
        NDList grads = nonFiniteGrads();
        NDArray found = manager.ones(new Shape());
        sgdStep(weights, grads, buffers, rate, WD, momentum, adjustment, step, found);
        assertBitwiseEqual(weightsBefore, weights, "weight");
        assertBitwiseEqual(buffersBefore, buffers, "momentum");
        assertEquals(1.0, step.getCount().getDouble(), "the update count did not advance");
        assertArrayEquals(
                new double[] {1, 1, 1},
                step.getPerParameter().toDoubleArray(),
                "nor any parameter's count");
        assertZeroed(grads);
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void aSkippedAdamStepChangesNothingAndClearsTheGradients(boolean decoupled) {
        NDList weights = randomArrays();
        NDList means = zerosLike(weights);
        NDList variances = zerosLike(weights);
        UpdateCounter step = counter(0);
        AdamSettings settings = new AdamSettings(0.9f, 0.999f, 1e-8f, WD, decoupled);
        LearningRate rate = scheduleTable(0);
        GradientAdjustment adjustment = new GradientAdjustment(RESCALE, CLIP);
        NDArray clean = manager.zeros(new Shape());
        adamStep(
                weights, randomArrays(), means, variances, rate, settings, adjustment, step, clean);
        NDList before = snapshot(weights);
        NDList meansBefore = snapshot(means);
        NDList variancesBefore = snapshot(variances);
        NDList grads = nonFiniteGrads();
        // a merged flag from two devices may read 2: still a skip
        NDArray found = manager.full(new Shape(), 2f);
        adamStep(weights, grads, means, variances, rate, settings, adjustment, step, found);
        assertBitwiseEqual(before, weights, "weight");
        assertBitwiseEqual(meansBefore, means, "first moment");
        assertBitwiseEqual(variancesBefore, variances, "second moment");
        assertEquals(1.0, step.getCount().getDouble(), "the update count did not advance");
        assertZeroed(grads);
    }

    @Test
    void mismatchedListsAreRejectedWithTheirNames() {
        NDList weights = randomArrays();
        NDList grads = new NDList(weights.get(0));
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () ->
                                sgdStep(
                                        weights,
                                        grads,
                                        new NDList(),
                                        LearningRate.fixed(LR),
                                        0f,
                                        0f,
                                        GradientAdjustment.NONE,
                                        counter(0),
                                        manager.zeros(new Shape())));
        assertEquals(true, e.getMessage().contains("gradients"), e.getMessage());
    }

    private static final float NAG_MOMENTUM = 0.9f;

    /**
     * Enough steps for a velocity to carry many past gradients, and to show a decay term taken at
     * the old weight instead of the new one (issue 30).
     */
    private static final int NAG_STEPS = 24;

    private FusedStep nag(LearningRate rate, GradientAdjustment adjustment, UpdateCounter counter) {
        return nag(rate, adjustment, counter, WD);
    }

    private FusedStep nag(
            LearningRate rate,
            GradientAdjustment adjustment,
            UpdateCounter counter,
            float weightDecay) {
        NDList[] buffers = new NDList[1];
        return (weights, grads, found) -> {
            if (buffers[0] == null) {
                buffers[0] = zerosLike(weights);
            }
            sgdFamilyStep(
                    "nag",
                    weights,
                    grads,
                    buffers[0],
                    rate,
                    weightDecay,
                    NAG_MOMENTUM,
                    adjustment,
                    counter,
                    found);
        };
    }

    @Test
    void nagMatchesDjlsNagRule() {
        assertMatchesDjl(
                new DjlNagRule(
                        Optimizer.nag().optWeightDecays(WD), Tracker.fixed(LR), NAG_MOMENTUM),
                nag(LearningRate.fixed(LR), GradientAdjustment.NONE, counter(0)),
                NAG_STEPS);
    }

    /**
     * Issue 30's example through the kernel: one bias element from zero, rate 0.05, momentum 0.9,
     * gradients 0.19885 then 0.31003. MXNet's {@code nag_mom_update} ({@link MxnetNagMomUpdate})
     * moves it by -0.01889 and then by -0.03751, to -0.05640.
     */
    @Test
    void nagMatchesTheIssuesHandExample() {
        NDList bias = new NDList(manager.zeros(new Shape(1)));
        FusedStep nag = nag(LearningRate.fixed(0.05f), GradientAdjustment.NONE, counter(0), 0f);
        NDArray clean = manager.zeros(new Shape());
        nag.step(bias, new NDList(manager.create(new float[] {0.19885f})), clean);
        assertEquals(-0.01889f, bias.get(0).getFloat(0), 5e-6f, "after the first update");
        nag.step(bias, new NDList(manager.create(new float[] {0.31003f})), clean);
        assertEquals(-0.05640f, bias.get(0).getFloat(0), 5e-6f, "after the second update");
    }

    /**
     * Issue 44's example through the kernel, three steps derived by hand from MXNet's kernel: bias
     * 0, rate 0.05, momentum 0.9, gradients 0.19885, 0.49649, -0.25. With {@code b = 0.9 b + g} and
     * {@code w -= 0.05 (g + 0.9 b)}: b = 0.19885, w = -0.01889075; b = 0.675455, w = -0.074110725;
     * b = 0.3579095, w = -0.0777166525.
     */
    @Test
    void nagMatchesIssue44sHandDerivedSteps() {
        NDList bias = new NDList(manager.zeros(new Shape(1)));
        FusedStep nag = nag(LearningRate.fixed(0.05f), GradientAdjustment.NONE, counter(0), 0f);
        NDArray clean = manager.zeros(new Shape());
        float[] grads = {0.19885f, 0.49649f, -0.25f};
        float[] expected = {-0.01889075f, -0.074110725f, -0.0777166525f};
        for (int step = 0; step < grads.length; step++) {
            nag.step(bias, new NDList(manager.create(new float[] {grads[step]})), clean);
            assertEquals(
                    expected[step], bias.get(0).getFloat(0), 2e-7f, "after step " + (step + 1));
        }
    }

    /**
     * What the issue measured for djl-amp after step 2, -0.055220, is the rule on that step's own
     * gradient, 0.29764: the issue's reference read 0.49649 = 0.19885 + 0.29764 there, a gradient
     * that kept the first step's (a Nag written by hand on DJL's per-parameter path must zero the
     * gradient, as DJL's native updates do, or PyTorch's backward adds into it). By hand: b = 0.9
     * 0.19885 + 0.29764 = 0.476605, w = -0.01889075 - 0.05 (0.29764 + 0.9 0.476605) = -0.055219975.
     */
    @Test
    void issue44sDjlAmpValueIsTheRuleOnTheSecondStepsOwnGradient() {
        NDList bias = new NDList(manager.zeros(new Shape(1)));
        FusedStep nag = nag(LearningRate.fixed(0.05f), GradientAdjustment.NONE, counter(0), 0f);
        NDArray clean = manager.zeros(new Shape());
        nag.step(bias, new NDList(manager.create(new float[] {0.19885f})), clean);
        nag.step(bias, new NDList(manager.create(new float[] {0.29764f})), clean);
        assertEquals(-0.055219975f, bias.get(0).getFloat(0), 2e-7f, "after step 2");
    }

    /** DJL clips a Nag gradient from both sides, where its PyTorch Sgd and Adam clip from above. */
    @Test
    void nagWithAScheduleRescaleTwoSidedClipAndBeginOffsetMatchesDjlsNagRule() {
        UpdateCounter counter = counter(BEGIN);
        assertMatchesDjl(
                new DjlNagRule(
                        Optimizer.nag()
                                .optWeightDecays(WD)
                                .setRescaleGrad(RESCALE)
                                .optClipGrad(CLIP)
                                .optBeginNumUpdate(BEGIN),
                        SCHEDULE,
                        NAG_MOMENTUM),
                nag(
                        scheduleTable(BEGIN, NAG_STEPS),
                        new GradientAdjustment(RESCALE, CLIP),
                        counter),
                NAG_STEPS);
        assertEquals(BEGIN + NAG_STEPS, counter.getCount().getDouble(), "DJL's update count");
    }

    @Test
    void aSkippedNagStepChangesNothingAndClearsTheGradients() {
        NDList weights = randomArrays();
        NDList buffers = zerosLike(weights);
        UpdateCounter step = counter(0);
        LearningRate rate = scheduleTable(0);
        GradientAdjustment adjustment = new GradientAdjustment(RESCALE, CLIP);
        NDArray clean = manager.zeros(new Shape());
        sgdFamilyStep(
                "nag",
                weights,
                randomArrays(),
                buffers,
                rate,
                WD,
                NAG_MOMENTUM,
                adjustment,
                step,
                clean);
        NDList weightsBefore = snapshot(weights);
        NDList buffersBefore = snapshot(buffers);
        NDList grads = nonFiniteGrads();
        NDArray found = manager.ones(new Shape());
        sgdFamilyStep(
                "nag", weights, grads, buffers, rate, WD, NAG_MOMENTUM, adjustment, step, found);
        assertBitwiseEqual(weightsBefore, weights, "weight");
        assertBitwiseEqual(buffersBefore, buffers, "momentum");
        assertEquals(1.0, step.getCount().getDouble(), "the update count did not advance");
        assertZeroed(grads);
    }

    /** Why the fused Nag is checked against DJL's rule: DJL's PyTorch engine has no Nag update. */
    @Test
    void djlsOwnNagHasNoUpdateOnPyTorch() {
        Optimizer nag =
                Optimizer.nag()
                        .setLearningRateTracker(Tracker.fixed(LR))
                        .setMomentum(NAG_MOMENTUM)
                        .build();
        NDArray weight = randomArrays().get(0);
        assertThrows(
                UnsupportedOperationException.class,
                () -> nag.update("p0", weight, weight.onesLike()),
                "DJL's PyTorch engine now updates Nag: compare the fused Nag with it directly");
    }

    @Test
    void aKernelTheEngineLacksIsRefusedNamingTheWayOut() {
        NDList weights = randomArrays();
        FusedOptimizerStep step =
                FusedOptimizerStep.builder("rmsprop")
                        .parameters(weights, zerosLike(weights))
                        .learningRate(LearningRate.fixed(LR))
                        .counter(counter(0))
                        .foundInf(manager.zeros(new Shape()))
                        .build();
        AmpException e = assertThrows(AmpException.class, () -> backend.fusedStep(step));
        assertEquals(true, e.getMessage().contains("'rmsprop'"), e.getMessage());
        assertEquals(true, e.getMessage().contains("FusedOptimizer.OFF"), e.getMessage());
    }

    @Test
    void aStepMissingAPartOrASettingIsRefusedNamingIt() {
        NDList weights = randomArrays();
        AmpException missing =
                assertThrows(
                        AmpException.class,
                        () ->
                                FusedOptimizerStep.builder("sgd")
                                        .parameters(weights, zerosLike(weights))
                                        .counter(counter(0))
                                        .foundInf(manager.zeros(new Shape()))
                                        .build());
        assertEquals(
                true, missing.getMessage().contains("learningRate(...)"), missing.getMessage());
        FusedOptimizerStep withoutBetas =
                FusedOptimizerStep.builder("adam")
                        .setting("epsilon", 1e-8f)
                        .parameters(weights, zerosLike(weights))
                        .state(zerosLike(weights))
                        .state(zerosLike(weights))
                        .learningRate(LearningRate.fixed(LR))
                        .counter(counter(0))
                        .foundInf(manager.zeros(new Shape()))
                        .build();
        AmpException settings =
                assertThrows(AmpException.class, () -> backend.fusedStep(withoutBetas));
        assertEquals(
                true,
                settings.getMessage().contains("takes the settings [beta1, beta2, epsilon]"),
                settings.getMessage());
    }
}
