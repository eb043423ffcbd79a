package io.github.djlamp.amp.compile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.TrustedResidualTest;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.Precision;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What the graph of a unit holds, whatever the engine computes: d2l-java's {@code Residual} run as
 * one 16-bit stage casts its input as the stage's plan says (layout, and whether a 16-bit input is
 * cast again), runs every convolution in 16 bits in that layout, or every one in fp32 where the
 * unit's kernel check put it there, and ends with its join's add and relu. Code the reading cannot
 * follow is refused with what it met. (On this project's CPUs a channels-last bf16 convolution
 * computes the same values as a contiguous one, so the engine tests cannot see the layout.)
 */
class UnitGraphTest {

    private static final String PATH = "01Residual";

    @Test
    void aUnitCastsItsInputAndRunsItsConvolutionsInItsLayout() {
        GraphPlan.UnitCast cast =
                new GraphPlan.UnitCast(true, GraphPlan.Layout.CHANNELS_LAST, true);
        List<ForwardOp> ops =
                graphOf(new TrustedResidualTest.Residual(4, true, new Shape(2, 2)), cast);
        assertEquals(
                new ForwardOp.UnitInput(1, 0, GraphPlan.Layout.CHANNELS_LAST, true), ops.get(0));
        List<ForwardOp.Convolution> convolutions = convolutions(ops);
        assertEquals(3, convolutions.size());
        for (ForwardOp.Convolution convolution : convolutions) {
            assertTrue(
                    convolution.lowPrecision() && convolution.channelsLast(),
                    convolution::toString);
        }
        ForwardOp add = ops.get(ops.size() - 2);
        ForwardOp relu = ops.get(ops.size() - 1);
        assertInstanceOf(ForwardOp.Add.class, add);
        assertEquals(new ForwardOp.Pointwise(relu.out(), add.out(), "relu"), relu);
    }

    @Test
    void aUnitItsKernelCheckKeptInFp32RunsEveryConvolutionInFp32() {
        GraphPlan.UnitCast cast = new GraphPlan.UnitCast(false, GraphPlan.Layout.AS_IT_IS, false);
        List<ForwardOp> ops =
                graphOf(new TrustedResidualTest.Residual(4, false, new Shape(1, 1)), cast);
        assertEquals(new ForwardOp.ToFp32(1, 0), ops.get(0));
        assertEquals(2, convolutions(ops).size());
        for (ForwardOp.Convolution convolution : convolutions(ops)) {
            assertFalse(convolution.lowPrecision() || convolution.channelsLast());
        }
    }

    /** javac names the field by the class of {@code this}; the field is declared above it. */
    @Test
    void aChildHeldInAnInheritedFieldIsRead() {
        GraphPlan.UnitCast cast = new GraphPlan.UnitCast(true, GraphPlan.Layout.AS_IT_IS, false);
        assertEquals(1, convolutions(graphOf(new Plain(), cast)).size());
    }

    /** A compiled run ignores labels, as DJL's blocks do: a block that reads them is refused. */
    @Test
    void aBlockWithAForwardOfItsOwnForLabelsIsRefused() {
        NotCompilableException refused =
                assertThrows(NotCompilableException.class, () -> graphOf(new WithLabels(), null));
        assertTrue(refused.getReason().contains("forward with labels"), refused::getReason);
    }

    @Test
    void codeThatBranchesOnTheTrainingFlagIsRefusedSayingSo() {
        NotCompilableException refused =
                assertThrows(NotCompilableException.class, () -> graphOf(new TrainingOnly(), null));
        assertEquals(PATH, refused.getBlockPath());
        assertTrue(
                refused.getReason().contains("branches on something other than"),
                refused::getReason);
    }

    @Test
    void aChildCalledWithAnotherTrainingFlagIsRefused() {
        NotCompilableException refused =
                assertThrows(
                        NotCompilableException.class, () -> graphOf(new AlwaysTraining(), null));
        assertTrue(
                refused.getReason().contains("its own store and training flag"),
                refused::getReason);
    }

    @Test
    void codeThatCatchesExceptionsIsRefused() {
        NotCompilableException refused =
                assertThrows(NotCompilableException.class, () -> graphOf(new Catching(), null));
        assertTrue(refused.getReason().contains("catches exceptions"), refused::getReason);
    }

    @Test
    void codeTheReadingCannotFollowIsRefusedNotThrown() {
        NotCompilableException refused =
                assertThrows(NotCompilableException.class, () -> graphOf(new PastTheEnd(), null));
        assertTrue(refused.getReason().contains("could not be followed"), refused::getReason);
    }

    private static List<ForwardOp> graphOf(Block unit, GraphPlan.UnitCast cast) {
        GraphPlan defaults = GraphPlan.defaults();
        GraphPlan plan =
                new GraphPlan() {
                    @Override
                    public CastCategory categoryOf(String path, Block block) {
                        return path.equals(PATH)
                                ? CastCategory.LOW
                                : defaults.categoryOf(path, block);
                    }

                    @Override
                    public boolean fp32Join(String path) {
                        return false;
                    }

                    @Override
                    public boolean runsLow(String path) {
                        return true;
                    }

                    @Override
                    public boolean channelsLast(String path) {
                        return false;
                    }

                    @Override
                    public boolean lowProducts(String path) {
                        return true;
                    }

                    @Override
                    public boolean productRunsLow(String path, AttentionProduct product) {
                        return true;
                    }

                    @Override
                    public UnitCast unitCast(String path) {
                        assertEquals(PATH, path);
                        return cast;
                    }
                };
        return ForwardGraphBuilder.of(List.of(new Pair<>(PATH, unit)), plan, Precision.BF16, false)
                .operations();
    }

    private static List<ForwardOp.Convolution> convolutions(List<ForwardOp> ops) {
        return ops.stream()
                .filter(ForwardOp.Convolution.class::isInstance)
                .map(ForwardOp.Convolution.class::cast)
                .toList();
    }

    /** A block holding one 1x1 convolution, whose code each case writes its own way. */
    abstract static class AroundAConvolution extends AbstractBlock {
        protected final Conv2d convolution =
                addChildBlock(
                        "convolution",
                        Conv2d.builder().setFilters(2).setKernelShape(new Shape(1, 1)).build());

        @Override
        public Shape[] getOutputShapes(Shape[] inputs) {
            return convolution.getOutputShapes(inputs);
        }
    }

    /** Runs its convolution, held in its parent class's field. */
    public static final class Plain extends AroundAConvolution {
        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList x, boolean training, PairList<String, Object> params) {
            return convolution.forward(store, x, training);
        }
    }

    /** Runs its convolution, and without it where labels come along. */
    public static final class WithLabels extends AroundAConvolution {
        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList x, boolean training, PairList<String, Object> params) {
            return convolution.forward(store, x, training);
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList x, NDList labels, PairList<String, Object> params) {
            return x;
        }
    }

    /** Runs its convolution in training only. */
    public static final class TrainingOnly extends AroundAConvolution {
        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList x, boolean training, PairList<String, Object> params) {
            return training ? convolution.forward(store, x, true) : x;
        }
    }

    /** Falls back to its input where its convolution throws. */
    public static final class Catching extends AroundAConvolution {
        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList x, boolean training, PairList<String, Object> params) {
            try {
                return convolution.forward(store, x, training);
            } catch (IllegalStateException e) {
                return x;
            }
        }
    }

    /** Stores its output past the end of the array it makes (as it would fail in Java). */
    public static final class PastTheEnd extends AroundAConvolution {
        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList x, boolean training, PairList<String, Object> params) {
            NDArray[] outputs = new NDArray[1];
            outputs[1] = convolution.forward(store, x, training).head();
            return new NDList(outputs);
        }
    }

    /** Calls its convolution as in training, whatever it is told. */
    public static final class AlwaysTraining extends AroundAConvolution {
        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList x, boolean training, PairList<String, Object> params) {
            return convolution.forward(store, x, true);
        }
    }
}
