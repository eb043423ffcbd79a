package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.basic.Mlp;
import ai.djl.basicmodelzoo.cv.classification.AlexNet;
import ai.djl.basicmodelzoo.cv.classification.GoogLeNet;
import ai.djl.basicmodelzoo.cv.classification.LeNet;
import ai.djl.basicmodelzoo.cv.classification.NiN;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.basicmodelzoo.cv.classification.SqueezeNet;
import ai.djl.basicmodelzoo.cv.classification.VGG;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The unnamed activation lambdas of DJL's model-zoo nets (ResNetV1, Mlp, AlexNet, VGG, NiN,
 * GoogLeNet, SqueezeNet, LeNet) run in 16 bits, and their ParallelBlock joins are known; user ones
 * are not.
 */
class ModelZooLambdasTest {

    private static int countLambdas(Block root, CastCategory expected) {
        int n = 0;
        for (Map.Entry<String, Block> e : BlockPaths.walk(root).entrySet()) {
            if (e.getValue() instanceof LambdaBlock) {
                assertEquals(
                        expected,
                        PrecisionPolicy.mixedBfloat16().categoryOf(e.getValue(), e.getKey()),
                        e.getKey());
                n++;
            }
        }
        return n;
    }

    private static Block resNet20() {
        return ResNetV1.builder()
                .setImageShape(new Shape(1, 28, 28))
                .setNumLayers(20)
                .setOutSize(10)
                .build();
    }

    @Test
    void resNetReluLambdasPassThrough() {
        assertTrue(countLambdas(resNet20(), CastCategory.PASS_THROUGH) >= 9);
    }

    @Test
    void theModelZoosActivationLambdasRunIn16BitsInEveryClassificationNet() {
        Map<String, Block> nets =
                Map.of(
                        "AlexNet", AlexNet.builder().build(),
                        "VGG", VGG.builder().build(),
                        "NiN", NiN.builder().build(),
                        "GoogLeNet", GoogLeNet.builder().build(),
                        "SqueezeNet", SqueezeNet.squeezenet(10),
                        "LeNet", LeNet.builder().build());
        for (Map.Entry<String, Block> net : nets.entrySet()) {
            int fp32Lambdas = 0;
            for (CastCategory c :
                    PrecisionPolicy.mixedBfloat16().resolveAll(net.getValue()).values()) {
                fp32Lambdas += c == CastCategory.FP32 ? 1 : 0;
            }
            assertEquals(0, fp32Lambdas, net.getKey() + ": fp32 stages");
            assertTrue(countLambdas(net.getValue(), CastCategory.PASS_THROUGH) > 0, net.getKey());
        }
    }

    @Test
    void theModelZoosJoinsAreKnownAndAUsersIsNot() {
        for (Block net :
                new Block[] {resNet20(), GoogLeNet.builder().build(), SqueezeNet.squeezenet(10)}) {
            int joins = 0;
            for (Block b : BlockPaths.walk(net).values()) {
                if (b instanceof ParallelBlock) {
                    assertTrue(DefaultCastRules.hasKnownJoin((ParallelBlock) b));
                    joins++;
                }
            }
            assertTrue(joins > 0);
        }
        ParallelBlock user = new ParallelBlock(UnknownCode::first, List.of(new SequentialBlock()));
        assertFalse(DefaultCastRules.hasKnownJoin(user));
    }

    @Test
    void mlpDefaultActivationPassesThroughButAUserOneDoesNot() {
        assertTrue(countLambdas(new Mlp(8, 2, new int[] {4, 4}), CastCategory.PASS_THROUGH) >= 2);
        Block custom = new Mlp(8, 2, new int[] {4}, (NDList x) -> UnknownCode.same(x));
        assertEquals(
                CastCategory.FP32,
                PrecisionPolicy.mixedBfloat16()
                        .categoryOf(custom.getChildren().get(2).getValue(), "03LambdaBlock"));
    }
}
