package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.bytecode.KnownLambdas;
import java.util.List;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * A user's lambda is known as safe on bf16 arrays when its body, read from the class file, calls
 * only DJL members that pass no data type to native code (and JDK collection and stream members),
 * and can be handed no code from outside. d2l-java's GoogLeNet joins its branches with a
 * concatenation written as a lambda; it ran in fp32 with a cast on each side of every join.
 *
 * <p>Each nested class writes one lambda: what one class writes decides its lambdas together.
 */
class SafeLambdaBodiesTest {

    private static ParallelBlock parallel(Function<List<NDList>, NDList> join) {
        return new ParallelBlock(
                join,
                List.of(
                        Linear.builder().setUnits(2).build(),
                        Linear.builder().setUnits(2).build()));
    }

    /** d2l-java's googlenet.ipynb, its join as written there. */
    static final class D2lGoogLeNetJoin {
        static ParallelBlock inception() {
            return new ParallelBlock(
                    list -> {
                        List<NDArray> concatenatedList =
                                list.stream().map(NDList::head).collect(Collectors.toList());
                        return new NDList(NDArrays.concat(new NDList(concatenatedList), 1));
                    },
                    List.of(
                            Linear.builder().setUnits(2).build(),
                            Linear.builder().setUnits(2).build()));
        }
    }

    static final class SoftmaxJoin {
        static ParallelBlock block() {
            return parallel(list -> new NDList(list.get(0).head().softmax(1)));
        }
    }

    static final class HelperJoin {
        static ParallelBlock block() {
            return parallel(list -> new NDList(sumOf(list)));
        }

        private static NDArray sumOf(List<NDList> list) {
            return list.get(0).head().add(list.get(1).head());
        }
    }

    static final class HelperCallingLogSoftmaxJoin {
        static ParallelBlock block() {
            return parallel(list -> new NDList(scores(list)));
        }

        private static NDArray scores(List<NDList> list) {
            return list.get(0).head().logSoftmax(1);
        }
    }

    static final class CapturedFunctionJoin {
        static ParallelBlock block(Function<NDList, NDArray> pick) {
            return parallel(
                    list ->
                            new NDList(
                                    NDArrays.concat(
                                            new NDList(
                                                    list.stream()
                                                            .map(pick)
                                                            .collect(Collectors.toList())),
                                            1)));
        }
    }

    static final class CapturedAxisJoin {
        static ParallelBlock block(int axis) {
            return parallel(
                    list -> new NDList(list.get(0).head().concat(list.get(1).head(), axis)));
        }
    }

    static final class ReluOfSumJoin {
        static ParallelBlock block() {
            return parallel(
                    list ->
                            new NDList(
                                    Activation.relu(list.get(0).head().add(list.get(1).head()))));
        }
    }

    static final class TypeReadingLambda {
        static LambdaBlock block() {
            return new LambdaBlock(x -> new NDList(x.head().toType(DataType.FLOAT32, false)));
        }
    }

    static final class ReshapingLambda {
        static LambdaBlock block() {
            return new LambdaBlock(x -> new NDList(x.head().reshape(-1, 4).transpose()));
        }
    }

    /** DJL's TransferFreshFruit drops the pooled axes of its TorchScript embedding so. */
    static final class SqueezingSingleton {
        static Block block() {
            return new SequentialBlock().addSingleton(nd -> nd.squeeze(new int[] {2, 3}));
        }
    }

    /**
     * TransferFreshFruit writes both singletons in one method: JDK 17 cannot tell the two lambda
     * objects apart, so the squeeze stayed fp32 beside the softmax until the probe told them.
     */
    static final class SqueezeThenSoftmax {
        static SequentialBlock block() {
            return new SequentialBlock()
                    .addSingleton(nd -> nd.squeeze(new int[] {2, 3}))
                    .addSingleton(nd -> nd.softmax(1));
        }
    }

    /**
     * DJL's TrainAmazonReviewRanking: a d2l-style {@code Activation::relu} in the head, written
     * beside the input lambda that makes the encoder's integer inputs.
     */
    static final class ReluBesideInputLambda {
        static SequentialBlock block() {
            SequentialBlock classifier = new SequentialBlock();
            classifier.add(
                    new LambdaBlock(
                            ndList -> {
                                NDArray data = ndList.singletonOrThrow();
                                NDList inputs = new NDList();
                                inputs.add(data.toType(DataType.INT64, false));
                                inputs.add(data.getManager().full(data.getShape(), 1));
                                return inputs;
                            }));
            classifier.add(Activation::relu);
            return classifier;
        }
    }

    /** A lambda that counts its calls before it touches its input: the probe must not run it. */
    static final class CountingBesideSqueeze {
        static int calls;

        static SequentialBlock block() {
            return new SequentialBlock()
                    .addSingleton(nd -> nd.squeeze(new int[] {2, 3}))
                    .addSingleton(
                            nd -> {
                                calls++;
                                return nd.softmax(1);
                            });
        }
    }

    /** Counts the calls made on it: it stands for an array a lambda captured. */
    static final class CountingArray {
        static int calls;

        static NDArray create() {
            return (NDArray)
                    java.lang.reflect.Proxy.newProxyInstance(
                            NDArray.class.getClassLoader(),
                            new Class<?>[] {NDArray.class},
                            (proxy, method, args) -> {
                                calls++;
                                return proxy;
                            });
        }
    }

    /**
     * Two lambdas capturing an array each: the second's first call is on that array, not on its
     * input.
     */
    static final class AddBesideCapturedArray {
        static SequentialBlock block(NDArray captured) {
            return new SequentialBlock()
                    .addSingleton(nd -> nd.add(captured))
                    .addSingleton(nd -> captured.softmax(1));
        }
    }

    static final class InitCounter {
        static int initialized;
    }

    /** A class whose static initializer has an effect: the probe must not be what runs it. */
    static final class SoftmaxHolder {
        static {
            InitCounter.initialized++;
        }

        static NDArray softmax(NDArray x) {
            return x.softmax(1);
        }
    }

    static final class SqueezeBesideAnotherClassesMethod {
        static SequentialBlock block() {
            return new SequentialBlock()
                    .addSingleton(nd -> nd.squeeze(new int[] {2, 3}))
                    .addSingleton(SoftmaxHolder::softmax);
        }
    }

    /** A product in a user's code: djl-amp's kernel check would not see it in 16 bits. */
    static final class GramLambda {
        static LambdaBlock block() {
            return new LambdaBlock(x -> new NDList(x.head().matMul(x.head().transpose())));
        }
    }

    static final class PrintingLambda {
        static LambdaBlock block() {
            return new LambdaBlock(
                    x -> {
                        System.out.println(x.head());
                        return x;
                    });
        }
    }

    @Test
    void d2lsGoogLeNetConcatenationIsKnownAndRunsIn16Bits() {
        ParallelBlock inception = D2lGoogLeNetJoin.inception();
        assertTrue(KnownLambdas.isKnownJoin(inception));
        assertNull(DefaultCastRules.bf16HazardIn(new SequentialBlock().add(inception), ""));
    }

    @Test
    void joinsThatStayWithinSafeMembersAreKnown() {
        assertTrue(KnownLambdas.isKnownJoin(HelperJoin.block()), "a private helper is read too");
        assertTrue(KnownLambdas.isKnownJoin(CapturedAxisJoin.block(1)), "an int captured");
        assertTrue(KnownLambdas.isKnownJoin(ReluOfSumJoin.block()), "DJL's relu, a bf16 kernel");
        assertTrue(
                KnownLambdas.isKnownJoin(new TestBlocks.D2lResidual(2).block),
                "d2l's Residual join");
    }

    @Test
    void joinsThatMayReachSoftmaxOrOutsideCodeAreNot() {
        assertFalse(KnownLambdas.isKnownJoin(SoftmaxJoin.block()));
        assertFalse(KnownLambdas.isKnownJoin(HelperCallingLogSoftmaxJoin.block()));
        assertFalse(
                KnownLambdas.isKnownJoin(CapturedFunctionJoin.block(NDList::head)),
                "a captured function may run anything");
        String hazard = DefaultCastRules.bf16HazardIn(SoftmaxJoin.block(), "01ParallelBlock");
        assertTrue(hazard != null && hazard.contains("join"), String.valueOf(hazard));
    }

    @Test
    void aSafeLambdaIsToldApartFromASoftmaxLambdaWrittenBesideIt() {
        SequentialBlock block = SqueezeThenSoftmax.block();
        LambdaBlock squeeze = (LambdaBlock) block.getChildren().get(0).getValue();
        LambdaBlock softmax = (LambdaBlock) block.getChildren().get(1).getValue();
        assertTrue(KnownLambdas.isPassThrough(squeeze), "the squeeze runs on 16-bit input");
        assertFalse(KnownLambdas.isPassThrough(softmax), "the softmax stays fp32");
    }

    @Test
    void aD2lStyleReluIsToldApartFromAnInputLambdaWrittenBesideIt() {
        SequentialBlock block = ReluBesideInputLambda.block();
        LambdaBlock input = (LambdaBlock) block.getChildren().get(0).getValue();
        LambdaBlock relu = (LambdaBlock) block.getChildren().get(1).getValue();
        assertTrue(KnownLambdas.isPassThrough(relu), "Activation::relu runs on 16-bit input");
        assertFalse(KnownLambdas.isPassThrough(input), "the input lambda reads a type: fp32");
    }

    @Test
    void aLambdaThatMayDoAnythingBeforeTouchingItsInputIsNeverRunToTellItApart() {
        SequentialBlock block = CountingBesideSqueeze.block();
        LambdaBlock squeeze = (LambdaBlock) block.getChildren().get(0).getValue();
        LambdaBlock counting = (LambdaBlock) block.getChildren().get(1).getValue();
        assertFalse(KnownLambdas.isPassThrough(squeeze), "not told apart: both stay fp32");
        assertFalse(KnownLambdas.isPassThrough(counting));
        assertEquals(0, CountingBesideSqueeze.calls, "neither lambda ran");
    }

    @Test
    void aMethodOfAnotherClassIsNeverCalledToTellItApart() {
        SequentialBlock block = SqueezeBesideAnotherClassesMethod.block();
        LambdaBlock squeeze = (LambdaBlock) block.getChildren().get(0).getValue();
        LambdaBlock softmax = (LambdaBlock) block.getChildren().get(1).getValue();
        assertFalse(KnownLambdas.isPassThrough(squeeze), "not told apart: both stay fp32");
        assertFalse(KnownLambdas.isPassThrough(softmax));
        assertEquals(0, InitCounter.initialized, "SoftmaxHolder's initializer did not run");
    }

    @Test
    void aLambdaThatCapturesAnArrayIsNeverRunToTellItApart() {
        SequentialBlock block = AddBesideCapturedArray.block(CountingArray.create());
        LambdaBlock add = (LambdaBlock) block.getChildren().get(0).getValue();
        LambdaBlock captured = (LambdaBlock) block.getChildren().get(1).getValue();
        assertFalse(KnownLambdas.isPassThrough(captured));
        assertFalse(KnownLambdas.isPassThrough(add), "not told apart: both stay fp32");
        assertEquals(0, CountingArray.calls, "the captured array was never called");
    }

    @Test
    void aLambdaBlockOfSafeMembersPassesThroughAndOneReadingATypeDoesNot() {
        Block reshaping = ReshapingLambda.block();
        assertTrue(KnownLambdas.isPassThrough((LambdaBlock) reshaping));
        assertEquals(CastCategory.PASS_THROUGH, DefaultCastRules.categoryOf(reshaping));
        Block squeezing = SqueezingSingleton.block().getChildren().get(0).getValue();
        assertTrue(KnownLambdas.isPassThrough((LambdaBlock) squeezing), "squeeze(int[])");
        assertFalse(KnownLambdas.isPassThrough(TypeReadingLambda.block()));
        assertFalse(
                KnownLambdas.isPassThrough(GramLambda.block()),
                "a product the kernel check would not see stays fp32");
        assertFalse(KnownLambdas.isPassThrough(PrintingLambda.block()), "printing calls toString");
    }
}
