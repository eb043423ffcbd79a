package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.cv.object_detection.yolo.YOLOV3;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.bytecode.KnownLambdas;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A lambda handed to {@code add} or {@code addSingleton} of a SequentialBlock the same method made
 * goes into a LambdaBlock, never into a ParallelBlock's join: DJL's YOLOv3 writes upsampling
 * lambdas (one calls {@code NDImageUtils.resize}, unsafe on bf16) and residual joins in one class,
 * and every join counted as unknown because the upsampling lambdas might have been it.
 *
 * <p>Each nested class writes its lambdas together: what one class writes decides them together.
 */
class SequentialDestinationsTest {

    /** A softmax lambda into a fresh SequentialBlock, and a safe join. */
    static final class FreshSequential {
        static SequentialBlock softmaxLayer() {
            return new SequentialBlock()
                    .add(Linear.builder().setUnits(2).build())
                    .addSingleton(x -> x.softmax(1));
        }

        static ParallelBlock residual() {
            return new ParallelBlock(
                    list ->
                            new NDList(
                                    NDArrays.add(
                                            list.get(0).singletonOrThrow(),
                                            list.get(1).singletonOrThrow())),
                    List.of(Linear.builder().setUnits(2).build(), softmaxLayer()));
        }
    }

    /** The same, with the SequentialBlock handed in: its class may be anyone's. */
    static final class SequentialHandedIn {
        static SequentialBlock softmaxLayer(SequentialBlock into) {
            return into.addSingleton(x -> x.softmax(1));
        }

        static ParallelBlock residual() {
            return new ParallelBlock(
                    list ->
                            new NDList(
                                    NDArrays.add(
                                            list.get(0).singletonOrThrow(),
                                            list.get(1).singletonOrThrow())),
                    List.of(
                            Linear.builder().setUnits(2).build(),
                            softmaxLayer(new SequentialBlock())));
        }
    }

    /** A subclass of SequentialBlock may keep the function it is handed anywhere. */
    static final class Keeping extends SequentialBlock {}

    static final class SubclassSequential {
        static SequentialBlock softmaxLayer() {
            return new Keeping().addSingleton(x -> x.softmax(1));
        }

        static ParallelBlock residual() {
            return new ParallelBlock(
                    list ->
                            new NDList(
                                    NDArrays.add(
                                            list.get(0).singletonOrThrow(),
                                            list.get(1).singletonOrThrow())),
                    List.of(Linear.builder().setUnits(2).build(), softmaxLayer()));
        }
    }

    @Test
    void aJoinIsKnownBesideAnUnknownLambdaAddedToAFreshSequentialBlock() {
        ParallelBlock residual = FreshSequential.residual();
        assertTrue(KnownLambdas.isKnownJoin(residual), "the join");
        Block softmax = FreshSequential.softmaxLayer().getChildren().get(1).getValue();
        assertFalse(
                KnownLambdas.isPassThrough((LambdaBlock) softmax), "the softmax lambda is unknown");
    }

    @Test
    void aJoinStaysUnknownWhereTheSequentialBlockMayBeAnotherClass() {
        assertFalse(KnownLambdas.isKnownJoin(SequentialHandedIn.residual()), "handed in");
        assertFalse(KnownLambdas.isKnownJoin(SubclassSequential.residual()), "a subclass");
    }

    @Test
    void yoloV3sResidualJoinsAreKnownAndOnlyItsResizeStaysFp32() {
        Block yolo = YOLOV3.builder().setNumClasses(1).build();
        int joins = 0;
        int upsampling = 0;
        for (Map.Entry<String, Block> e : BlockPaths.walk(yolo).entrySet()) {
            if (e.getValue() instanceof ParallelBlock) {
                assertTrue(KnownLambdas.isKnownJoin((ParallelBlock) e.getValue()), e.getKey());
                joins++;
            } else if (e.getKey().contains("UpSample") && e.getValue() instanceof LambdaBlock) {
                // transpose, resize, transpose: three lambdas of one type in one class, told
                // apart by LambdaProbe
                boolean resize = e.getKey().endsWith("02LambdaBlock");
                assertEquals(
                        resize ? CastCategory.FP32 : CastCategory.PASS_THROUGH,
                        PrecisionPolicy.mixedBfloat16().categoryOf(e.getValue(), e.getKey()),
                        e.getKey()
                                + (resize
                                        ? ": NDImageUtils.resize reads its input's data type"
                                        : ": a transpose"));
                upsampling++;
            }
        }
        assertEquals(23, joins, "darkNet-53's residual units");
        assertEquals(6, upsampling, "two upsampling blocks of three lambdas");
    }
}
