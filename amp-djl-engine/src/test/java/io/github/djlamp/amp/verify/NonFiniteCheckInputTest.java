package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.util.Pair;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A NaN or an infinity in what a kernel check computes on (the first batch, the weights) judges the
 * kernels as finite values do. Before, the fp32 reference's NaN met the direct sum's NaN and the
 * check called fp32 itself wrong: the platform unsound, with the WARN to restart under an ISA cap,
 * and that verdict kept on disk for every later run on the machine (seen in the suite's own runs: a
 * test that trains on NaN batches). Machine-independent: on a platform whose kernels are wrong the
 * finite and the non-finite checks find the same, and no finding is about a NaN.
 */
class NonFiniteCheckInputTest {

    private static final List<MemoryLayout> BOTH =
            Arrays.asList(MemoryLayout.CHANNELS_LAST, MemoryLayout.CONTIGUOUS);

    @BeforeEach
    void forgetVerdicts() {
        KernelVerdicts.forgetAll();
    }

    @ParameterizedTest
    @EnumSource(
            value = Precision.class,
            names = {"BF16", "FP16"})
    void aNanAndAnInfinityInTheInputJudgeALinearLayerAsAFiniteInputDoes(Precision precision) {
        judgedAlike(
                precision,
                () -> Linear.builder().setUnits(8).build(),
                new Shape(4, 16),
                NonFiniteCheckInputTest::plantInFirstRow);
    }

    @ParameterizedTest
    @EnumSource(
            value = Precision.class,
            names = {"BF16", "FP16"})
    void aNanAndAnInfinityInTheInputJudgeAConvolutionAsAFiniteInputDoes(Precision precision) {
        judgedAlike(
                precision,
                () -> Conv2d.builder().setFilters(8).setKernelShape(new Shape(3, 3)).build(),
                new Shape(2, 4, 6, 6),
                NonFiniteCheckInputTest::plantInFirstRow);
    }

    @ParameterizedTest
    @EnumSource(
            value = Precision.class,
            names = {"BF16", "FP16"})
    void aNanWeightJudgesTheKernelsAsFiniteWeightsDo(Precision precision) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            KernelVerdict finite =
                    Layers.check(backend, linear(), new Shape(4, 16), precision, BOTH, manager);
            KernelVerdicts.forgetAll();
            Block withNan = linear();
            withNan.initialize(manager, DataType.FLOAT32, new Shape(4, 16));
            NDArray weight = weightOf(withNan);
            weight.setRequiresGradient(false); // set again when Layers.check initializes
            weight.set(new NDIndex(0, 0), Float.NaN);
            // Layers.check initializes again only what is not initialized yet
            KernelVerdict planted =
                    Layers.check(backend, withNan, new Shape(4, 16), precision, BOTH, manager);
            assertTrue(Float.isNaN(weightOf(withNan).getFloat(0, 0)), "the weight is the user's");
            assertAlike(finite, planted);
        }
    }

    @ParameterizedTest
    @EnumSource(
            value = Precision.class,
            names = {"BF16", "FP16"})
    void aNanInAProductsOperandJudgesItAsFiniteOperandsDo(Precision precision) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            KernelVerdict finite = product(backend, precision, manager, false);
            KernelVerdicts.forgetAll();
            KernelVerdict planted = product(backend, precision, manager, true);
            assertAlike(finite, planted);
        }
    }

    /**
     * A layer after a 16-bit one gets a bf16 input: the check's finite copy is made without DJL's
     * {@code toType}, which ends the JVM on the type it reads as UNKNOWN (seen in a user's run with
     * one NaN in the first batch).
     */
    @org.junit.jupiter.api.Test
    void aNanInABf16InputIsReplacedWithoutEndingTheJvm() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            KernelVerdict finite =
                    Layers.check(
                            backend, linear(), new Shape(4, 16), Precision.BF16, BOTH, manager);
            KernelVerdicts.forgetAll();
            KernelVerdict nonFinite =
                    Layers.check(
                            backend,
                            linear(),
                            new Shape(4, 16),
                            Precision.BF16,
                            BOTH,
                            manager,
                            x ->
                                    backend.cast(
                                            plantInFirstRow(x),
                                            Precision.BF16,
                                            MemoryLayout.CONTIGUOUS,
                                            manager));
            assertAlike(finite, nonFinite);
        }
    }

    /** A block the engine's autocast runs whole (an LSTM, a TorchScript module) alike. */
    @ParameterizedTest
    @EnumSource(
            value = Precision.class,
            names = {"BF16", "FP16"})
    void aNanInAStagesInputJudgesItAsAFiniteInputDoes(Precision precision) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            Block block = StageCheckTest.mlp(manager);
            ai.djl.training.ParameterStore masters =
                    new ai.djl.training.ParameterStore(manager, false);
            NDArray finite = manager.randomNormal(new Shape(8, 16));
            KernelVerdict judged =
                    new KernelVerifier(backend)
                            .stageVerdict(
                                    block,
                                    "mlp",
                                    new ai.djl.ndarray.NDList(finite),
                                    masters,
                                    true,
                                    precision,
                                    null);
            KernelVerdicts.forgetAll();
            NDArray planted = plantInFirstRow(finite);
            KernelVerdict nonFinite =
                    new KernelVerifier(backend)
                            .stageVerdict(
                                    block,
                                    "mlp",
                                    new ai.djl.ndarray.NDList(planted),
                                    masters,
                                    true,
                                    precision,
                                    null);
            assertAlike(judged, nonFinite);
        }
    }

    /**
     * A first batch that is NaN throughout still has the kernels judged: compared on NaN, nothing
     * would differ, and a wrong 16-bit kernel would be called verified and kept.
     */
    @ParameterizedTest
    @EnumSource(
            value = Precision.class,
            names = {"BF16", "FP16"})
    void aWrongKernelIsFoundOnAnInputThatIsNanThroughout(Precision precision) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            KernelVerdict verdict =
                    Layers.check(
                            AmpBackends.forManager(manager),
                            WrongLowPrecisionConv2d.create(8, 5, 2),
                            new Shape(4, 1, 12, 12),
                            precision,
                            BOTH,
                            manager,
                            x -> x.getManager().full(x.getShape(), Float.NaN));
            assertEquals(
                    KernelVerdict.Outcome.FP32_FALLBACK, verdict.getOutcome(), verdict.toString());
        }
    }

    /**
     * A first layer's input (data, no gradient of its own) that is zero throughout exercises no
     * product: the output is the bias and the weight's gradient zero, so a wrong kernel passed and
     * was kept as verified.
     */
    @ParameterizedTest
    @EnumSource(
            value = Precision.class,
            names = {"BF16", "FP16"})
    void aWrongKernelIsFoundOnABlankFirstBatch(Precision precision) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block conv = WrongLowPrecisionConv2d.create(8, 5, 2);
            Shape shape = new Shape(4, 1, 12, 12);
            Engine.getInstance().setRandomSeed(11);
            conv.initialize(manager, DataType.FLOAT32, shape);
            KernelVerdict verdict =
                    new KernelVerifier(AmpBackends.forManager(manager))
                            .verdict(
                                    conv,
                                    "test/blank",
                                    manager.zeros(shape),
                                    new ai.djl.training.ParameterStore(manager, false),
                                    false,
                                    precision,
                                    BOTH,
                                    false);
            assertEquals(
                    KernelVerdict.Outcome.FP32_FALLBACK, verdict.getOutcome(), verdict.toString());
        }
    }

    /**
     * A weight past fp16's largest value rounds to an infinity in the check's fp16 copies: a range
     * that loss scaling and the fp16 range finding speak to, not a wrong fp32 kernel.
     */
    @org.junit.jupiter.api.Test
    void aWeightPastFp16sRangeDoesNotMakeThePlatformUnsound() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block large = linear();
            large.initialize(manager, DataType.FLOAT32, new Shape(4, 16));
            NDArray weight = weightOf(large);
            weight.setRequiresGradient(false);
            weight.set(new NDIndex(0, 0), 1e5f);
            KernelVerdict verdict =
                    Layers.check(
                            AmpBackends.forManager(manager),
                            large,
                            new Shape(4, 16),
                            Precision.FP16,
                            BOTH,
                            manager);
            System.out.println(verdict);
            assertTrue(
                    verdict.getOutcome() != KernelVerdict.Outcome.PLATFORM_UNSOUND,
                    verdict.toString());
        }
    }

    private static void judgedAlike(
            Precision precision,
            Supplier<Block> layer,
            Shape input,
            java.util.function.UnaryOperator<NDArray> plant) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            KernelVerdict finite =
                    Layers.check(backend, layer.get(), input, precision, BOTH, manager);
            KernelVerdicts.forgetAll();
            NDArray[] planted = new NDArray[1];
            KernelVerdict nonFinite =
                    Layers.check(
                            backend,
                            layer.get(),
                            input,
                            precision,
                            BOTH,
                            manager,
                            x -> planted[0] = plant.apply(x));
            assertTrue(
                    Float.isNaN(planted[0].toFloatArray()[0]),
                    "the check changed the caller's input");
            assertAlike(finite, nonFinite);
        }
    }

    private static void assertAlike(KernelVerdict finite, KernelVerdict nonFinite) {
        System.out.println("finite: " + finite + "\nnon-finite: " + nonFinite);
        for (String finding : nonFinite.getFindings()) {
            assertFalse(finding.contains("NaN") || finding.contains("Infinity"), finding);
        }
        if (finite.getOutcome() == KernelVerdict.Outcome.VERIFIED) {
            assertEquals(
                    KernelVerdict.Outcome.VERIFIED, nonFinite.getOutcome(), nonFinite.toString());
        } else {
            System.out.println(
                    "this platform's kernels are wrong at this signature ("
                            + finite.getOutcome()
                            + "): the non-finite check is held to naming no NaN only");
        }
    }

    /** NaN first and an infinity last in the first sample: a row every check samples. */
    private static NDArray plantInFirstRow(NDArray x) {
        long perSample = x.size() / x.getShape().get(0);
        float[] values = x.toFloatArray();
        values[0] = Float.NaN;
        values[(int) perSample - 1] = Float.POSITIVE_INFINITY;
        return x.getManager().create(values, x.getShape());
    }

    private static KernelVerdict product(
            AmpBackend backend, Precision precision, NDManager manager, boolean nan) {
        Engine.getInstance().setRandomSeed(5);
        NDArray a = manager.randomNormal(0, 1, new Shape(2, 2, 5, 64), DataType.FLOAT32);
        NDArray b = manager.randomNormal(0, 1, new Shape(2, 2, 64, 5), DataType.FLOAT32);
        if (nan) {
            a.set(new NDIndex(0, 0, 0, 0), Float.NaN);
        }
        a.setRequiresGradient(true);
        b.setRequiresGradient(true);
        return new KernelVerifier(backend)
                .productVerdict("test/attention", "test product", a, b, precision, true);
    }

    private static Block linear() {
        return Linear.builder().setUnits(8).build();
    }

    private static NDArray weightOf(Block block) {
        for (Pair<String, Parameter> p : block.getParameters()) {
            if (p.getKey().endsWith("weight")) {
                return p.getValue().getArray();
            }
        }
        throw new AssertionError("no weight");
    }
}
