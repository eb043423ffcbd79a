package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.cv.classification.GoogLeNet;
import ai.djl.basicmodelzoo.cv.classification.SqueezeNet;
import ai.djl.ndarray.NDList;
import ai.djl.nn.Block;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The per-unit summary says what stays fp32 and why, joins included. */
class PrecisionSummaryTest {

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
}
