package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.engine.Engine;
import ai.djl.inference.Predictor;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.SequentialBlock;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.dataset.Dataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.translate.NoopTranslator;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.verify.KernelVerdict;
import io.github.djlamp.amp.verify.KernelVerdicts;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Supplier;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

/**
 * A LeNet-like CNN trained on Fashion-MNIST under {@code mixed_bfloat16} learns weights that mean
 * the same in plain DJL fp32: saved with {@code Model.save} and loaded into the same architecture
 * without djl-amp, it predicts the same class as the AMP model for at least 99% of the test images.
 * On some machines oneDNN computes this network's bf16 stem wrong, and a model trained there
 * without djl-amp's kernel check learns the broken kernel (77% under AMP, 16.55% for the same
 * weights in fp32); with the check, that layer falls back.
 *
 * <p>Which layers may fall back is decided independently of djl-amp's verifier ({@link
 * IndependentKernelCheck}: each convolution and linear layer, at each input shape the model ran,
 * through the engine in fp32 and bf16 against a naive double-precision sum). On a sound machine
 * nothing falls back; on a defective one exactly the layers found wrong do, each with the outcome
 * the independent check implies. So the test fails here if the verifier flags a correct kernel, and
 * on a defective machine if the fallback is gone (the verdicts, and the agreement with fp32).
 *
 * <p>Tagged {@code one-optimizer-path}: the suite's second run, with fused optimizer steps, skips
 * it; the kernels checked are the forward and backward of the layers, whatever the optimizer step,
 * and this test names {@link FusedOptimizer#OFF}.
 */
@Tag("one-optimizer-path")
class KernelVerificationOnFashionMnistTest {

    private static final int BATCH = 32;
    private static final int TRAIN_STEPS = 250;
    private static final int TEST_IMAGES = 10_000;
    private static final int EVAL_BATCH = 500;
    private static final double MIN_AGREEMENT = 0.99;
    private static final double FLOOR = 0.70;
    private static final List<MemoryLayout> BOTH =
            List.of(MemoryLayout.CHANNELS_LAST, MemoryLayout.CONTIGUOUS);

    @TempDir Path dir;

    @BeforeEach
    void forgetVerdicts() {
        // verdicts are per process: this model's layers must be checked by this model's steps
        KernelVerdicts.forgetAll();
    }

    @Test
    void bf16WeightsPredictTheSameInPlainFp32AndOnlyWrongKernelsFallBack() throws Exception {
        try (NDManager data = NDManager.newBaseManager("PyTorch")) {
            FashionMnist train =
                    ItData.prepare(Dataset.Usage.TRAIN, BATCH, TRAIN_STEPS * BATCH, data);
            FashionMnist test = ItData.prepare(Dataset.Usage.TEST, EVAL_BATCH, TEST_IMAGES, data);
            long start = System.nanoTime();

            Predictions amp;
            List<KernelVerdict> verdicts;
            List<IndependentKernelCheck.Finding> findings = new ArrayList<>();
            try (Model model = Model.newInstance("lenet", "PyTorch")) {
                SequentialBlock lenet = Models.leNet();
                MixedPrecisionBlock wrapped = Amp.wrap(lenet, "mixed_bfloat16");
                model.setBlock(wrapped);
                train(model, wrapped, 5, train);
                double trained = seconds(start);
                amp = predict(model, test);
                model.save(dir, "lenet");
                verdicts = wrapped.getKernelVerdicts();
                System.out.printf(
                        Locale.ROOT,
                        "trained %d steps of %d in %.1f s under mixed_bfloat16; predicted %d test"
                                + " images in %.1f s%n",
                        TRAIN_STEPS,
                        BATCH,
                        trained,
                        TEST_IMAGES,
                        seconds(start) - trained);
                // every layer at each input shape the model ran: training (the stem's input has
                // no gradient, the others' do) and inference (no input gradients)
                try (NDManager scratch = NDManager.newBaseManager("PyTorch")) {
                    for (int batch : new int[] {BATCH, EVAL_BATCH}) {
                        boolean training = batch == BATCH;
                        List<IndependentKernelCheck.Layer> layers =
                                IndependentKernelCheck.checkedLayers(
                                        lenet, new Shape(batch, 1, 28, 28));
                        for (int i = 0; i < layers.size(); i++) {
                            IndependentKernelCheck.Layer layer = layers.get(i);
                            findings.add(
                                    IndependentKernelCheck.check(
                                            layer.path,
                                            layer.block,
                                            layer.input,
                                            training && i > 0,
                                            layer.input.dimension() == 4
                                                    ? BOTH
                                                    : BOTH.subList(0, 1),
                                            scratch));
                        }
                    }
                }
            }

            Predictions fp32;
            try (Model plain = Model.newInstance("lenet", "PyTorch")) {
                SequentialBlock block = Models.leNet();
                plain.setBlock(block);
                block.initialize(plain.getNDManager(), DataType.FLOAT32, new Shape(1, 1, 28, 28));
                plain.load(dir, "lenet");
                fp32 = predict(plain, test);
            }
            System.out.printf(Locale.ROOT, "whole test: %.1f s%n", seconds(start));

            assertEquals(amp.labelsHash, fp32.labelsHash, "both predicted the same images");
            double agreement = amp.agreement(fp32);
            System.out.printf(
                    Locale.ROOT,
                    "test accuracy: djl-amp bf16 %.2f%%, the same weights in plain DJL fp32 %.2f%%;"
                            + " predicted classes agree on %.2f%% of %d test images%n",
                    100 * amp.accuracy(),
                    100 * fp32.accuracy(),
                    100 * agreement,
                    TEST_IMAGES);

            List<Executable> checks = new ArrayList<>();
            checks.add(() -> assertKernelVerdicts(findings, verdicts));
            checks.add(
                    () ->
                            assertTrue(
                                    agreement >= MIN_AGREEMENT,
                                    String.format(
                                            Locale.ROOT,
                                            "the bf16-trained weights must mean the same in plain"
                                                    + " fp32: predictions agree on %.2f%% < %.0f%%"
                                                    + " (a model that learned a wrong kernel?)",
                                            100 * agreement,
                                            100 * MIN_AGREEMENT)));
            checks.add(
                    () ->
                            assertTrue(
                                    amp.accuracy() > FLOOR,
                                    "djl-amp bf16 accuracy " + amp.accuracy()));
            checks.add(
                    () ->
                            assertTrue(
                                    fp32.accuracy() > FLOOR,
                                    "plain fp32 accuracy " + fp32.accuracy()));
            assertAll(checks.stream());
        }
    }

    /**
     * On a sound machine no kernel falls back; on a defective one each layer at each input shape
     * has the verdict the independent check implies, and exactly the layers found wrong fall back.
     */
    private static void assertKernelVerdicts(
            List<IndependentKernelCheck.Finding> findings, List<KernelVerdict> verdicts) {
        System.out.println("djl-amp's verdicts for this model:");
        verdicts.forEach(v -> System.out.println("  " + v.getPaths() + " " + v));
        boolean defective = false;
        System.out.println("independent check (engine vs. naive double sums):");
        for (IndependentKernelCheck.Finding f : findings) {
            System.out.println("  " + (f.defective() ? "WRONG " : "right ") + f);
            defective |= f.defective();
        }
        assertEquals(
                findings.size(),
                verdicts.size(),
                "one verdict per layer and input shape the model ran (training and inference)");
        Set<String> wrongLayers = new TreeSet<>();
        Set<String> fellBack = new TreeSet<>();
        for (IndependentKernelCheck.Finding f : findings) {
            KernelVerdict verdict = verdictOf(verdicts, f);
            if (f.defective()) {
                wrongLayers.add(f.path);
            }
            if (verdict.getOutcome() != KernelVerdict.Outcome.VERIFIED) {
                fellBack.add(f.path);
            }
            KernelVerdict.Outcome expected = f.expected();
            if (expected == null) {
                System.out.println(
                        "  "
                                + f.path
                                + " on "
                                + f.input
                                + ": fp32 itself is wrong here, so only 'not VERIFIED' can be"
                                + " asserted (the verifier's sampled fp32 reference decides"
                                + " between PLATFORM_UNSOUND and a fallback)");
                assertNotEquals(KernelVerdict.Outcome.VERIFIED, verdict.getOutcome(), f.path);
            } else {
                assertEquals(
                        expected,
                        verdict.getOutcome(),
                        f.path
                                + " on "
                                + f.input
                                + ": the independent check found "
                                + f
                                + "; djl-amp decided "
                                + verdict);
            }
        }
        if (!defective) {
            System.out.println(
                    "platform sound: every kernel agrees with the exact sums, so nothing may fall"
                            + " back");
            assertTrue(
                    KernelVerdicts.defects().isEmpty(),
                    "a sound platform, but djl-amp flagged: " + KernelVerdicts.defects());
        } else {
            System.out.println(
                    "platform DEFECTIVE: layers computed wrong in bf16 "
                            + wrongLayers
                            + "; djl-amp fell back in "
                            + fellBack);
            assertNotEquals(
                    KernelVerdict.Outcome.VERIFIED,
                    verdictOf(verdicts, findings.get(0)).getOutcome(),
                    "the stem");
        }
        assertEquals(wrongLayers, fellBack, "exactly the layers found wrong fall back");
    }

    private static KernelVerdict verdictOf(
            List<KernelVerdict> verdicts, IndependentKernelCheck.Finding f) {
        KernelVerdict found = null;
        for (KernelVerdict v : verdicts) {
            if (v.getPaths().contains(f.path) && v.getInputShape().equals(f.input)) {
                assertEquals(null, found, "two verdicts for " + f.path + " on " + f.input);
                found = v;
            }
        }
        assertNotEquals(null, found, "no verdict for " + f.path + " on " + f.input);
        return found;
    }

    /**
     * {@code auto} resolves on this machine and trains; where the LeNet stem's bf16 kernel is wrong
     * in every layout, it must not pick bf16 (it checks that layer before choosing).
     */
    @Test
    void autoResolvesAndTrains() throws Exception {
        try (NDManager data = NDManager.newBaseManager("PyTorch");
                Model model = Model.newInstance("lenet-auto", "PyTorch")) {
            FashionMnist train = ItData.prepare(Dataset.Usage.TRAIN, BATCH, 100 * BATCH, data);
            FashionMnist test = ItData.prepare(Dataset.Usage.TEST, EVAL_BATCH, 2_000, data);
            SequentialBlock lenet = Models.leNet();
            MixedPrecisionBlock wrapped = Amp.wrap(lenet, "auto");
            model.setBlock(wrapped);
            train(model, wrapped, 6, train);
            Predictions result = predict(model, test);
            Device device = model.getNDManager().getDevice();
            Precision chosen =
                    wrapped.resolvePolicy(device, model.getNDManager()).getComputePrecision();
            System.out.printf(
                    Locale.ROOT,
                    "auto on %s: %s (%s); test accuracy after 100 steps %.2f%%%n",
                    device,
                    chosen,
                    wrapped.describePolicyChoice(device, model.getNDManager()),
                    100 * result.accuracy());
            IndependentKernelCheck.Finding stem;
            try (NDManager scratch = NDManager.newBaseManager("PyTorch")) {
                IndependentKernelCheck.Layer layer =
                        IndependentKernelCheck.checkedLayers(lenet, new Shape(BATCH, 1, 28, 28))
                                .get(0);
                stem =
                        IndependentKernelCheck.check(
                                layer.path, layer.block, layer.input, true, BOTH, scratch);
            }
            System.out.println("independent check of the stem: " + stem);
            assertTrue(result.accuracy() > 0.6, "auto trains: accuracy " + result.accuracy());
            if (stem.expected() != KernelVerdict.Outcome.VERIFIED
                    && stem.expected() != KernelVerdict.Outcome.OTHER_LAYOUT) {
                assertEquals(
                        Precision.FP32,
                        chosen,
                        "the LeNet stem's bf16 kernel is wrong in every layout here, so auto must"
                                + " not compute in 16 bits");
            }
        }
    }

    private static void train(Model model, MixedPrecisionBlock wrapped, int seed, Dataset train)
            throws Exception {
        DefaultTrainingConfig config =
                new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                        .optOptimizer(
                                Optimizer.adam()
                                        .optLearningRateTracker(Tracker.fixed(0.002f))
                                        .build());
        try (Trainer trainer =
                model.newTrainer(
                        Amp.configure(
                                config,
                                wrapped,
                                AmpOptions.builder().fusedOptimizer(FusedOptimizer.OFF).build()))) {
            Engine.getInstance().setRandomSeed(seed);
            trainer.initialize(new Shape(BATCH, 1, 28, 28));
            EasyTrain.fit(trainer, 1, train, null);
        }
    }

    /** The class a model predicts for each test image, through a {@code Predictor}. */
    private static Predictions predict(Model model, Dataset test) throws Exception {
        List<Long> predicted = new ArrayList<>();
        List<Long> labels = new ArrayList<>();
        try (Predictor<NDList, NDList> predictor = model.newPredictor(new NoopTranslator())) {
            for (Batch batch : test.getData(model.getNDManager())) {
                try (batch) {
                    NDArray logits = predictor.predict(batch.getData()).singletonOrThrow();
                    assertEquals(DataType.FLOAT32, logits.getDataType(), "logits");
                    for (long p : logits.argMax(1).toLongArray()) {
                        predicted.add(p);
                    }
                    for (float l : batch.getLabels().singletonOrThrow().toFloatArray()) {
                        labels.add((long) l);
                    }
                }
            }
        }
        return new Predictions(predicted, labels);
    }

    private static double seconds(long since) {
        return (System.nanoTime() - since) / 1e9;
    }

    /** Predicted classes and true labels, image by image. */
    private static final class Predictions {
        final List<Long> predicted;
        final List<Long> labels;
        final int labelsHash;

        Predictions(List<Long> predicted, List<Long> labels) {
            this.predicted = predicted;
            this.labels = labels;
            this.labelsHash = labels.hashCode();
        }

        double accuracy() {
            return fraction(() -> labels);
        }

        double agreement(Predictions other) {
            return fraction(() -> other.predicted);
        }

        private double fraction(Supplier<List<Long>> reference) {
            List<Long> r = reference.get();
            assertEquals(predicted.size(), r.size());
            long same = 0;
            for (int i = 0; i < predicted.size(); i++) {
                if (predicted.get(i).equals(r.get(i))) {
                    same++;
                }
            }
            return (double) same / predicted.size();
        }
    }
}
