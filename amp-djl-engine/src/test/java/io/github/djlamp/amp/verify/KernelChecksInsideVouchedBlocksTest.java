package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.LowPrecisionSafe;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * DJL's convolutions and linear layers inside a block that computes in 16 bits on someone's word
 * ({@code LowPrecisionSafe}, {@code class:X=trusted}) are checked as DJL's own layers elsewhere are
 * (issue 30): each gets a verdict under its path, and a wrong 16-bit kernel inside makes the whole
 * block, which djl-amp runs as a unit, fall back to fp32.
 */
class KernelChecksInsideVouchedBlocksTest {

    private static final Shape INPUT = new Shape(4, 1, 12, 12);

    @BeforeEach
    void forgetVerdicts() {
        KernelVerdicts.forgetAll();
    }

    /** A user's unit: a convolution, then a linear layer, in its own forward. */
    abstract static class Unit extends AbstractBlock {
        private final Block conv;
        private final Block linear;

        Unit(Block conv) {
            this.conv = addChildBlock("conv", conv);
            this.linear = addChildBlock("linear", Linear.builder().setUnits(10).build());
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore ps, NDList x, boolean training, PairList<String, Object> params) {
            NDArray y = conv.forward(ps, x, training).singletonOrThrow();
            return linear.forward(ps, new NDList(y.reshape(y.getShape().get(0), -1)), training);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return new Shape[] {new Shape(inputs[0].get(0), 10)};
        }

        @Override
        protected void initializeChildBlocks(
                ai.djl.ndarray.NDManager manager, DataType dataType, Shape... inputShapes) {
            conv.initialize(manager, dataType, inputShapes);
            Shape out = conv.getOutputShapes(inputShapes)[0];
            linear.initialize(manager, dataType, new Shape(out.get(0), out.size() / out.get(0)));
        }
    }

    /** Marked safe by its author, with a convolution whose 16-bit kernel is wrong. */
    static final class MarkedWithWrongConv extends Unit implements LowPrecisionSafe {
        MarkedWithWrongConv() {
            super(WrongLowPrecisionConv2d.create(4, 3, 1));
        }
    }

    /** Not marked: trusted by the policy, with DJL's Conv2d. */
    public static final class TrustedUnit extends Unit {
        public TrustedUnit() {
            super(conv3x3());
        }
    }

    private static Block conv3x3() {
        return Conv2d.builder()
                .setFilters(4)
                .setKernelShape(new Shape(3, 3))
                .optPadding(new Shape(1, 1))
                .build();
    }

    /**
     * Trusted by the policy, its linear layer initialized with the batch left open, as DJL's
     * attention projections are ({@code (-1, E)}).
     */
    public static final class OpenBatchUnit extends Unit {
        public OpenBatchUnit() {
            super(conv3x3());
        }

        @Override
        protected void initializeChildBlocks(
                ai.djl.ndarray.NDManager manager, DataType dataType, Shape... inputShapes) {
            Block conv = getChildren().get(0).getValue();
            conv.initialize(manager, dataType, inputShapes);
            Shape out = conv.getOutputShapes(inputShapes)[0];
            getChildren()
                    .get(1)
                    .getValue()
                    .initialize(manager, dataType, new Shape(-1, out.size() / out.get(0)));
        }
    }

    private static Block net(Block unit, NDManager manager) {
        Engine.getInstance().setRandomSeed(7);
        Block net = new SequentialBlock().add(unit);
        net.initialize(manager, DataType.FLOAT32, INPUT);
        return net;
    }

    private static float[] forward(Block block, NDArray x, NDManager manager) {
        return block.forward(new ParameterStore(manager, false), new NDList(x), false)
                .singletonOrThrow()
                .toFloatArray();
    }

    @Test
    void aWrongKernelInsideAMarkedBlockMakesTheBlockFallBackToFp32() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block net = net(new MarkedWithWrongConv(), manager);
            NDArray x = manager.randomNormal(0, 1, INPUT, DataType.FLOAT32);
            float[] expected = forward(net, x, manager);
            MixedPrecisionBlock wrapped = Amp.wrap(net, "mixed_bfloat16");
            float[] actual = forward(wrapped, x, manager);
            for (int i = 0; i < expected.length; i++) {
                assertEquals(expected[i], actual[i], 1e-5f, "the block ran in fp32: " + i);
            }
            List<KernelVerdict> verdicts = wrapped.getKernelVerdicts();
            KernelVerdict conv = find(verdicts, "01MarkedWithWrongConv/01conv");
            assertEquals(KernelVerdict.Outcome.FP32_FALLBACK, conv.getOutcome(), conv.toString());
        }
    }

    @Test
    void theLayersInsideATrustedBlockGetVerdicts() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block net = net(new TrustedUnit(), manager);
            NDArray x = manager.randomNormal(0, 1, INPUT, DataType.FLOAT32);
            float[] expected = forward(net, x, manager);
            MixedPrecisionBlock wrapped =
                    Amp.wrap(
                            net,
                            "mixed_bfloat16[class:" + TrustedUnit.class.getName() + "=trusted]");
            float[] actual = forward(wrapped, x, manager);
            double worst = 0;
            double scale = 0;
            for (int i = 0; i < expected.length; i++) {
                worst = Math.max(worst, Math.abs(expected[i] - actual[i]));
                scale = Math.max(scale, Math.abs(expected[i]));
            }
            assertTrue(worst > 0, "the trusted block computes in bf16");
            assertTrue(worst < 0.03 * scale, "bf16 rounding only: " + worst);
            List<KernelVerdict> verdicts = wrapped.getKernelVerdicts();
            for (String path : List.of("01TrustedUnit/01conv", "01TrustedUnit/02linear")) {
                KernelVerdict verdict = find(verdicts, path);
                assertEquals(
                        KernelVerdict.Outcome.VERIFIED, verdict.getOutcome(), verdict.toString());
            }
        }
    }

    /**
     * The check of a layer initialized with an open dimension runs it as 1, and leaves the layer's
     * own input shape as DJL recorded it (DJL hands out its shape's array, not a copy).
     */
    @Test
    void aLayerInitializedWithAnOpenDimensionIsCheckedAndKeepsItsShape() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            OpenBatchUnit unit = new OpenBatchUnit();
            Block net = net(unit, manager);
            Block linear = unit.getChildren().get(1).getValue();
            assertEquals(new Shape(-1, 576), linear.getInputShapes()[0]);
            MixedPrecisionBlock wrapped =
                    Amp.wrap(
                            net,
                            "mixed_bfloat16[class:" + OpenBatchUnit.class.getName() + "=trusted]");
            forward(wrapped, manager.randomNormal(0, 1, INPUT, DataType.FLOAT32), manager);
            KernelVerdict verdict = find(wrapped.getKernelVerdicts(), "01OpenBatchUnit/02linear");
            assertEquals(new Shape(1, 576), verdict.getInputShape(), verdict.toString());
            assertEquals(new Shape(-1, 576), linear.getInputShapes()[0]);
        }
    }

    private static KernelVerdict find(List<KernelVerdict> verdicts, String path) {
        for (KernelVerdict verdict : verdicts) {
            if (verdict.getPaths().contains(path)) {
                return verdict;
            }
        }
        throw new AssertionError("no kernel verdict names " + path + ": " + verdicts);
    }
}
