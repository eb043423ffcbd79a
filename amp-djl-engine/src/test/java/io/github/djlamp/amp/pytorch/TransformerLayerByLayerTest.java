package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import io.github.djlamp.amp.cast.ArithmeticShare;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.cast.PrecisionSummary;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.verify.KernelVerdict;
import io.github.djlamp.amp.verify.WrongProductVerdicts;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * DJL's TransformerEncoderBlock runs layer by layer under a 16-bit policy: its projections,
 * feed-forward layers and attention products in 16 bits, softmax and the residual sums in fp32.
 * djl-amp's copy of DJL's forward is checked against DJL's own, bitwise where nothing is cast.
 */
class TransformerLayerByLayerTest {

    private static final int EMBEDDING = 16;

    /**
     * Two encoder blocks and a classifier head, as a user stacks them; no dropout. With a mask, one
     * block: DJL's encoder block returns no mask for the next one.
     */
    private static SequentialBlock model(boolean masked) {
        if (masked) {
            return new SequentialBlock()
                    .add(new TransformerEncoderBlock(EMBEDDING, 2, 32, 0f, Activation::relu));
        }
        return new SequentialBlock()
                .add(new TransformerEncoderBlock(EMBEDDING, 2, 32, 0f, Activation::relu))
                .add(new TransformerEncoderBlock(EMBEDDING, 2, 32, 0f, Activation::relu))
                .add(Linear.builder().setUnits(3).build());
    }

    /** The output and every parameter's gradient of one training forward and backward. */
    private static final class Run {
        final float[] output;
        final Map<String, float[]> gradients = new LinkedHashMap<>();

        Run(float[] output, Block original) {
            this.output = output;
            for (Pair<String, Parameter> p : original.getParameters()) {
                NDArray array = p.getValue().getArray();
                if (array.hasGradient()) {
                    NDArray gradient = array.getGradient();
                    gradients.put(p.getKey(), gradient.toFloatArray());
                    gradient.subi(gradient); // DJL never zeroes gradients
                }
            }
        }
    }

    private static Run train(Block block, Block original, NDList inputs, NDManager manager) {
        ParameterStore store = new ParameterStore(manager, false);
        try (NDManager step = manager.newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            NDList attached = new NDList();
            for (NDArray input : inputs) {
                NDArray copy = input.duplicate();
                copy.attach(step);
                attached.add(copy);
            }
            NDArray output = block.forward(store, attached, true).singletonOrThrow();
            Engine.getInstance().setRandomSeed(3);
            NDArray weights = step.randomNormal(output.getShape());
            collector.backward(output.mul(weights).sum());
            return new Run(output.toFloatArray(), original);
        }
    }

    private static NDList inputs(NDManager manager, boolean masked) {
        Engine.getInstance().setRandomSeed(11);
        NDArray tokens = manager.randomNormal(new Shape(4, 8, EMBEDDING));
        if (!masked) {
            return new NDList(tokens);
        }
        float[] valid = new float[4 * 8];
        for (int i = 0; i < valid.length; i++) {
            valid[i] = i % 8 < 8 - i / 8 ? 1 : 0; // sequences of 8, 7, 6 and 5 tokens
        }
        NDArray mask = manager.create(valid, new Shape(4, 8));
        NDArray attention = mask.reshape(4, 1, 8).repeat(1, 8); // (B, T, F) as DJL's BertBlock
        return new NDList(tokens, attention);
    }

    private static SequentialBlock initialized(NDManager manager, NDList inputs) {
        Engine.getInstance().setRandomSeed(5);
        SequentialBlock model = model(inputs.size() > 1);
        // DJL's encoder block is initialized with the tokens' shape alone, as BertBlock does
        model.initialize(manager, DataType.FLOAT32, inputs.head().getShape());
        return model;
    }

    @Test
    void withNothingCastTheCopyOfDjlsForwardIsBitwiseDjls() {
        for (boolean masked : new boolean[] {false, true}) {
            try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
                NDList inputs = inputs(manager, masked);
                SequentialBlock model = initialized(manager, inputs);
                Run djl = train(model, model, inputs, manager);
                // a 16-bit policy whose every layer computes in fp32: the shadow runs, casting
                // nothing
                MixedPrecisionBlock wrapped =
                        new MixedPrecisionBlock(
                                model,
                                PrecisionPolicy.parse(
                                        "mixed_bfloat16[class:ai.djl.nn.core.Linear=fp32]"));
                Run shadow = train(wrapped, model, inputs, manager);
                assertArrayEquals(djl.output, shadow.output, "output, masked=" + masked);
                assertEquals(djl.gradients.keySet(), shadow.gradients.keySet());
                for (String name : djl.gradients.keySet()) {
                    assertArrayEquals(
                            djl.gradients.get(name),
                            shadow.gradients.get(name),
                            name + ", masked=" + masked);
                }
            }
        }
    }

    @Test
    void underBfloat16TheLayersInsideComputeIn16BitsCloseToFp32() {
        assertCloseToFp32("mixed_bfloat16", 0.05, 0.25);
    }

    @Test
    void underFloat16TheLayersInsideComputeIn16BitsCloseToFp32() {
        assertCloseToFp32("mixed_float16", 0.01, 0.15);
    }

    /**
     * Where the kernel check finds a 16-bit attention product wrong (recorded here as a broken
     * platform would make it), both products run in fp32: the summary and the arithmetic share say
     * so, and on the CPU the gradients come closer to fp32's (bf16: 4.3% against 8.4% with the
     * products in bf16), since the products make about half of the 16-bit error there. Without the
     * fallback the wrong product's result would be used.
     */
    @Test
    void attentionProductsFoundWrongRunInFp32() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            NDList inputs = inputs(manager, false);
            SequentialBlock model = initialized(manager, inputs);
            Run fp32 = train(model, model, inputs, manager);
            WrongProductVerdicts.forgetAll();
            double checked = gradientError(fp32, train(bf16(model), model, inputs, manager));

            WrongProductVerdicts.forgetAll();
            try {
                // (batch 4, 2 heads, 8 tokens, head size 8): both products multiply 8x8 matrices
                Shape heads = new Shape(4, 2, 8, 8);
                AmpBackend backend = AmpBackends.forManager(manager);
                Device device = manager.getDevice();
                WrongProductVerdicts.record(
                        backend, "attention scores", heads, heads, device, Precision.BF16);
                WrongProductVerdicts.record(
                        backend, "attention-weighted values", heads, heads, device, Precision.BF16);
                MixedPrecisionBlock wrapped = bf16(model);
                Run fellBack = train(wrapped, model, inputs, manager);
                double fallback = gradientError(fp32, fellBack);
                System.out.printf(
                        "bf16 gradients' relative error: products checked %.4f, products in fp32"
                                + " %.4f%n",
                        checked, fallback);
                assertTrue(fallback != checked, "the products ran otherwise: " + fallback);
                if (!manager.getDevice().isGpu()) {
                    // on an H200 the bf16 products add little of the error (0.0622 with them in
                    // fp32, 0.0581 in bf16): cuBLAS rounds their results only, once
                    assertTrue(
                            fallback < 0.7 * checked,
                            "products in fp32: " + fallback + ", in bf16: " + checked);
                }

                String unit = "01TransformerEncoderBlock/01selfAttention (attention products)";
                PrecisionSummary summary = wrapped.getPrecisionSummary(device, manager);
                PrecisionSummary.Row row =
                        summary.getRows().stream()
                                .filter(r -> r.getPath().equals(unit))
                                .findFirst()
                                .orElseThrow();
                assertEquals(CastCategory.FP32, row.getCategory(), summary.toString());
                assertTrue(row.getReason().contains("FP32_FALLBACK"), row.getReason());
                ArithmeticShare share = wrapped.getArithmeticShare(device);
                for (ArithmeticShare.Unit counted : share.getUnits()) {
                    if (counted.getPath().endsWith("(attention products)")) {
                        assertEquals(Precision.FP32, counted.getPrecision(), counted.toString());
                    }
                }
                assertTrue(share.getLowShare() < 1, share.toString());
            } finally {
                WrongProductVerdicts.forgetAll(); // the other tests check the products again
            }
        }
    }

    private static MixedPrecisionBlock bf16(Block model) {
        return new MixedPrecisionBlock(model, PrecisionPolicy.parse("mixed_bfloat16"));
    }

    private static double gradientError(Run expected, Run actual) {
        return relativeError(concatenated(expected.gradients), concatenated(actual.gradients));
    }

    private static float[] concatenated(Map<String, float[]> gradients) {
        int n = 0;
        for (float[] g : gradients.values()) {
            n += g.length;
        }
        float[] all = new float[n];
        int at = 0;
        for (float[] g : gradients.values()) {
            System.arraycopy(g, 0, all, at, g.length);
            at += g.length;
        }
        return all;
    }

    /** ||actual - expected|| / ||expected||. */
    private static double relativeError(float[] expected, float[] actual) {
        double difference = 0;
        double norm = 0;
        for (int i = 0; i < expected.length; i++) {
            difference += Math.pow(actual[i] - expected[i], 2);
            norm += Math.pow(expected[i], 2);
        }
        return Math.sqrt(difference) / Math.max(Math.sqrt(norm), 1e-3);
    }

    private static void assertCloseToFp32(
            String policy, double tolerance, double gradientTolerance) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            NDList inputs = inputs(manager, false);
            SequentialBlock model = initialized(manager, inputs);
            Run fp32 = train(model, model, inputs, manager);
            MixedPrecisionBlock wrapped =
                    new MixedPrecisionBlock(model, PrecisionPolicy.parse(policy));
            Run low = train(wrapped, model, inputs, manager);

            assertClose(fp32.output, low.output, tolerance, "output");
            assertFalse(
                    java.util.Arrays.equals(fp32.output, low.output),
                    "16-bit compute rounds: an output bitwise fp32's computed nothing in 16 bits");
            // Measured over all parameters: a bias whose true gradient is 0 (a key bias under
            // softmax, a bias before BatchNorm) has no relative error of its own. The attention
            // products in 16 bits make the largest part of the error (dP - sum(P dP) cancels
            // where attention is near uniform, as under PyTorch's autocast): with them in fp32 the
            // gradients of this model are within 0.4% (fp16).
            double error = relativeError(concatenated(fp32.gradients), concatenated(low.gradients));
            System.out.printf("%s: gradients' relative error %.4f%n", policy, error);
            assertTrue(error < gradientTolerance, policy + ": relative gradient error " + error);

            PrecisionSummary summary = wrapped.getPrecisionSummary(manager.getDevice(), manager);
            List<String> low16 = new ArrayList<>();
            for (PrecisionSummary.Row row : summary.getRows()) {
                if (row.getCategory() == CastCategory.LOW) {
                    low16.add(row.getPath());
                }
            }
            // per block: 4 projections, the attention products, 2 feed-forward layers; the head
            assertEquals(15, low16.size(), summary.toString());
            assertTrue(
                    low16.contains(
                            "01TransformerEncoderBlock/01selfAttention (attention products)"),
                    summary.toString());
            ArithmeticShare share = wrapped.getArithmeticShare(manager.getDevice());
            // projections, feed-forward layers, attention products and the head: every product
            assertEquals(1.0, share.getLowShare(), 1e-9, share.getUnits().toString());
            long products = 0;
            for (ArithmeticShare.Unit unit : share.getUnits()) {
                products += unit.getPath().endsWith("(attention products)") ? unit.getFlops() : 0;
            }
            // two blocks, each two products of (4 x 2 heads) 8x8 by 8x8 matrices of head size 8
            assertEquals(2 * 2 * 2 * (4 * 2) * 8 * 8 * 8, products, share.getUnits().toString());
            List<String> checked = new ArrayList<>();
            for (KernelVerdict verdict : wrapped.getKernelVerdicts()) {
                checked.addAll(verdict.getPaths());
            }
            assertTrue(
                    checked.contains("02TransformerEncoderBlock/01selfAttention/02queryProjection"),
                    "the projections ran in 16 bits, each checked at first use: " + checked);
            assertTrue(
                    checked.contains(
                            "02TransformerEncoderBlock/01selfAttention (attention products)"),
                    "the attention products ran in 16 bits, checked at first use: " + checked);
        }
    }

    private static void assertClose(
            float[] expected, float[] actual, double tolerance, String what) {
        assertEquals(expected.length, actual.length, what);
        double scale = 1e-6;
        for (float v : expected) {
            scale = Math.max(scale, Math.abs(v));
        }
        for (int i = 0; i < expected.length; i++) {
            assertEquals(expected[i], actual[i], tolerance * scale, what + "[" + i + "]");
        }
    }
}
