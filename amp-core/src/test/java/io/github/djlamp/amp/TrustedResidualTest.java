package io.github.djlamp.amp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.pooling.Pool;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.LowPrecisionSafe;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.Arrays;
import java.util.Properties;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * The README's trust example (issue 30): d2l-java's {@code Residual}, which keeps its two branches
 * in a ParallelBlock joined by a lambda it writes itself, vouched for through a policy string, a
 * properties file or {@code trust(...)}, wraps; what a voucher does not cover is refused with a
 * message that never suggests the setting already passed.
 */
public class TrustedResidualTest {

    /** d2l-java's Residual (chapter 7.6), as d2l-java writes it. */
    public static final class Residual extends AbstractBlock {

        public final ParallelBlock block;

        public Residual(int numChannels, boolean use1x1Conv, Shape strideShape) {
            SequentialBlock b1 = new SequentialBlock();
            b1.add(
                            Conv2d.builder()
                                    .setFilters(numChannels)
                                    .setKernelShape(new Shape(3, 3))
                                    .optPadding(new Shape(1, 1))
                                    .optStride(strideShape)
                                    .build())
                    .add(BatchNorm.builder().build())
                    .add(Activation::relu)
                    .add(
                            Conv2d.builder()
                                    .setFilters(numChannels)
                                    .setKernelShape(new Shape(3, 3))
                                    .optPadding(new Shape(1, 1))
                                    .build())
                    .add(BatchNorm.builder().build());
            SequentialBlock conv1x1 = new SequentialBlock();
            if (use1x1Conv) {
                conv1x1.add(
                        Conv2d.builder()
                                .setFilters(numChannels)
                                .setKernelShape(new Shape(1, 1))
                                .optStride(strideShape)
                                .build());
            } else {
                conv1x1.add(Blocks.identityBlock());
            }
            block =
                    addChildBlock(
                            "residualBlock",
                            new ParallelBlock(
                                    list -> {
                                        NDList unit = list.get(0);
                                        NDList parallel = list.get(1);
                                        return new NDList(
                                                unit.singletonOrThrow()
                                                        .add(parallel.singletonOrThrow())
                                                        .getNDArrayInternal()
                                                        .relu());
                                    },
                                    Arrays.asList(b1, conv1x1)));
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore parameterStore,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            return block.forward(parameterStore, inputs, training);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return block.getOutputShapes(inputs);
        }
    }

    /** The same unit as d2l's Python Residual: conv1, conv2, bn1, bn2, an optional 1x1 conv3. */
    public static final class PlainResidual extends AbstractBlock {
        private final Block conv1;
        private final Block conv2;
        private final Block conv3;
        private final Block bn1;
        private final Block bn2;

        public PlainResidual(int numChannels, boolean use1x1Conv) {
            conv1 = addChildBlock("conv1", conv(numChannels, 3));
            conv2 = addChildBlock("conv2", conv(numChannels, 3));
            conv3 = use1x1Conv ? addChildBlock("conv3", conv(numChannels, 1)) : null;
            bn1 = addChildBlock("bn1", BatchNorm.builder().build());
            bn2 = addChildBlock("bn2", BatchNorm.builder().build());
        }

        private static Block conv(int channels, int kernel) {
            return Conv2d.builder()
                    .setFilters(channels)
                    .setKernelShape(new Shape(kernel, kernel))
                    .optPadding(new Shape(kernel / 2, kernel / 2))
                    .build();
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore ps, NDList x, boolean training, PairList<String, Object> params) {
            NDList y = bn1.forward(ps, conv1.forward(ps, x, training), training);
            y = new NDList(Activation.relu(y.singletonOrThrow()));
            y = bn2.forward(ps, conv2.forward(ps, y, training), training);
            NDList shortcut = conv3 == null ? x : conv3.forward(ps, x, training);
            return new NDList(
                    Activation.relu(y.singletonOrThrow().add(shortcut.singletonOrThrow())));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return conv2.getOutputShapes(conv1.getOutputShapes(inputs));
        }
    }

    /** A join written by another class than the block that holds it: no voucher covers it. */
    static final class Joins {
        static final Function<java.util.List<NDList>, NDList> ADD =
                io.github.djlamp.amp.policy.UnknownCode::first;
    }

    /** A block that holds a join written elsewhere. */
    public static final class ForeignJoinUnit extends AbstractBlock {
        private final Block block;

        public ForeignJoinUnit() {
            block =
                    addChildBlock(
                            "parallel",
                            new ParallelBlock(
                                    Joins.ADD,
                                    Arrays.asList(
                                            Linear.builder().setUnits(4).build(),
                                            Linear.builder().setUnits(4).build())));
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore ps, NDList x, boolean training, PairList<String, Object> params) {
            return block.forward(ps, x, training);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return block.getOutputShapes(inputs);
        }
    }

    /** The same, marked safe by its author. */
    public static final class MarkedForeignJoinUnit extends AbstractBlock
            implements LowPrecisionSafe {
        private final Block block;

        public MarkedForeignJoinUnit() {
            block =
                    addChildBlock(
                            "parallel",
                            new ParallelBlock(
                                    Joins.ADD,
                                    Arrays.asList(
                                            Linear.builder().setUnits(4).build(),
                                            Linear.builder().setUnits(4).build())));
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore ps, NDList x, boolean training, PairList<String, Object> params) {
            return block.forward(ps, x, training);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return block.getOutputShapes(inputs);
        }
    }

    private static Block resNet(Block unit, Block unit2) {
        return new SequentialBlock()
                .add(
                        Conv2d.builder()
                                .setFilters(8)
                                .setKernelShape(new Shape(3, 3))
                                .optPadding(new Shape(1, 1))
                                .build())
                .add(BatchNorm.builder().build())
                .add(Activation::relu)
                .add(unit)
                .add(unit2)
                .add(Pool.globalAvgPool2dBlock())
                .add(Linear.builder().setUnits(10).build());
    }

    private static Block d2lResNet() {
        return resNet(
                new Residual(8, false, new Shape(1, 1)), new Residual(16, true, new Shape(2, 2)));
    }

    private static String residual() {
        return Residual.class.getName();
    }

    @Test
    void d2lsResidualTrustedInThePolicyStringWraps() {
        MixedPrecisionBlock wrapped =
                Amp.wrap(d2lResNet(), "mixed_bfloat16[class:" + residual() + "=trusted]");
        assertEquals(CastCategory.LOW, category(wrapped, "04Residual"));
    }

    @Test
    void d2lsResidualTrustedInAPropertiesFileWraps() {
        Properties properties = new Properties();
        properties.setProperty("policy", "mixed_bfloat16");
        properties.setProperty("override.class." + residual(), "trusted");
        MixedPrecisionBlock wrapped =
                Amp.wrap(d2lResNet(), PrecisionPolicy.fromProperties(properties));
        assertEquals(CastCategory.LOW, category(wrapped, "05Residual"));
    }

    @Test
    void d2lsResidualTrustedInTheBuilderWraps() {
        MixedPrecisionBlock wrapped =
                Amp.wrap(
                        d2lResNet(),
                        PrecisionPolicy.builder(PrecisionPolicy.mixedBfloat16())
                                .trust(Residual.class)
                                .build());
        assertEquals(CastCategory.LOW, category(wrapped, "04Residual"));
    }

    @Test
    void thePlainResidualTrustedWraps() {
        MixedPrecisionBlock wrapped =
                Amp.wrap(
                        resNet(new PlainResidual(8, false), new PlainResidual(8, true)),
                        "mixed_bfloat16[class:" + PlainResidual.class.getName() + "=trusted]");
        assertEquals(CastCategory.LOW, category(wrapped, "04PlainResidual"));
    }

    @Test
    void aJoinWrittenElsewhereIsRefusedWithoutSuggestingTheTrustPassed() {
        String trusted = "mixed_bfloat16[class:" + ForeignJoinUnit.class.getName() + "=trusted]";
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () ->
                                Amp.wrap(
                                        new SequentialBlock()
                                                .add(Linear.builder().setUnits(4).build())
                                                .add(new ForeignJoinUnit()),
                                        trusted));
        String message = e.getMessage();
        assertTrue(message.contains("its join function"), message);
        String advice = message.substring(message.indexOf(" runs '"));
        assertFalse(advice.contains("=trusted"), message);
        assertFalse(advice.contains("LowPrecisionSafe (for"), message);
        assertTrue(message.contains(ForeignJoinUnit.class.getName() + "=fp32"), message);
    }

    @Test
    void aMarkedBlockWithAJoinWrittenElsewhereIsRefusedWithoutSuggestingTheMark() {
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () ->
                                Amp.wrap(
                                        new SequentialBlock()
                                                .add(Linear.builder().setUnits(4).build())
                                                .add(new MarkedForeignJoinUnit()),
                                        "mixed_bfloat16"));
        String message = e.getMessage();
        assertTrue(message.contains("its join function"), message);
        assertFalse(
                message.contains("implement io.github.djlamp.amp.policy.LowPrecisionSafe"),
                message);
        assertFalse(message.contains("=trusted"), message);
        assertTrue(message.contains(MarkedForeignJoinUnit.class.getName() + "=fp32"), message);
    }

    private static CastCategory category(MixedPrecisionBlock wrapped, String suffix) {
        return wrapped.getPolicy().resolveAll(wrapped.getOriginal()).entrySet().stream()
                .filter(e -> e.getKey().endsWith(suffix))
                .findFirst()
                .orElseThrow()
                .getValue();
    }
}
