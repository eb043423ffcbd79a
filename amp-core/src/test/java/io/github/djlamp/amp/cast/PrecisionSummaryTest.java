package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.cv.classification.GoogLeNet;
import ai.djl.basicmodelzoo.cv.classification.SqueezeNet;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.pooling.Pool;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/** The per-unit summary says what stays fp32 and why, joins included. */
class PrecisionSummaryTest {

    /** Under float32 the header said "0% of N parameters compute in float32" (DJL's TicTacToe). */
    @Test
    void underFloat32TheHeaderSaysEverythingComputesInFp32() {
        String header =
                PrecisionSummary.of(SqueezeNet.squeezenet(10), PrecisionPolicy.parse("float32"))
                        .toString()
                        .lines()
                        .findFirst()
                        .orElseThrow();
        assertTrue(header.startsWith("float32: all 0 parameters compute in fp32, in "), header);
    }

    @Test
    void modelZooNetsWithKnownJoinsHaveNoFp32Unit() {
        for (Block net : new Block[] {GoogLeNet.builder().build(), SqueezeNet.squeezenet(10)}) {
            PrecisionSummary summary = PrecisionSummary.of(net, PrecisionPolicy.mixedBfloat16());
            assertEquals(0, summary.getFp32Units(), summary.toString());
        }
    }

    @Test
    void anUnknownJoinIsAnFp32UnitUnderBf16OnlyWithItsReason() {
        Block model =
                new SequentialBlock()
                        .add(
                                new ParallelBlock(
                                        list -> new NDList(list.get(0).head().softmax(1)),
                                        List.of(Linear.builder().setUnits(4).build())));
        PrecisionSummary bf16 = PrecisionSummary.of(model, PrecisionPolicy.mixedBfloat16());
        PrecisionSummary.Row join = bf16.getRows().get(bf16.getRows().size() - 1);
        assertEquals("01ParallelBlock (join)", join.getPath());
        assertEquals(CastCategory.FP32, join.getCategory());
        assertTrue(join.getReason().contains("unknown content"), join.getReason());
        assertTrue(bf16.toString().contains("01ParallelBlock (join)"), bf16.toString());
        assertEquals(0, PrecisionSummary.of(model, PrecisionPolicy.mixedFloat16()).getFp32Units());
    }

    /** A LeNet as d2l-java writes it, with the activations {@code act} makes. */
    private static Block leNet(Function<NDList, NDList> act) {
        return new SequentialBlock()
                .add(Conv2d.builder().setFilters(6).setKernelShape(new Shape(5, 5)).build())
                .add(act)
                .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                .add(Conv2d.builder().setFilters(16).setKernelShape(new Shape(5, 5)).build())
                .add(act)
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(10).build());
    }

    @Test
    void methodReferencesToDjlActivationsMakeNoFp32Island() {
        // as d2l-java writes its networks: the activations are method references in its own class
        PrecisionSummary summary =
                PrecisionSummary.of(
                        leNet(ai.djl.nn.Activation::sigmoid), PrecisionPolicy.mixedBfloat16());
        assertEquals(List.of(), summary.getFp32Islands(), summary.toString());
        assertEquals(0, summary.getFp32Units(), summary.toString());
    }

    /** A user's own activation, a lambda of unknown content, in a class of its own. */
    static final class UserActivation {
        static Function<NDList, NDList> sigmoid() {
            return x -> io.github.djlamp.amp.policy.UnknownCode.same(x);
        }
    }

    @Test
    void activationLambdasOfUnknownContentAreFp32IslandsBetween16BitLayers() {
        PrecisionSummary summary =
                PrecisionSummary.of(
                        leNet(UserActivation.sigmoid()), PrecisionPolicy.mixedBfloat16());
        assertEquals(List.of("02LambdaBlock", "05LambdaBlock"), summary.getFp32Islands());
        Block named =
                new SequentialBlock()
                        .add(Conv2d.builder().setFilters(6).setKernelShape(new Shape(5, 5)).build())
                        .add(ai.djl.nn.Activation.sigmoidBlock())
                        .add(Linear.builder().setUnits(10).build());
        assertEquals(
                List.of(),
                PrecisionSummary.of(named, PrecisionPolicy.mixedBfloat16()).getFp32Islands());
    }
}
