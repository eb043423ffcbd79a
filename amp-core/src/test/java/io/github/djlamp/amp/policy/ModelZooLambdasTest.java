package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.basic.Mlp;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The unnamed ReLU lambdas of DJL's model-zoo ResNetV1 and Mlp run in 16 bits, user ones not. */
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

    @Test
    void resNetReluLambdasPassThrough() {
        Block resnet =
                ResNetV1.builder()
                        .setImageShape(new Shape(1, 28, 28))
                        .setNumLayers(20)
                        .setOutSize(10)
                        .build();
        assertTrue(countLambdas(resnet, CastCategory.PASS_THROUGH) >= 9);
    }

    @Test
    void mlpDefaultActivationPassesThroughButAUserOneDoesNot() {
        assertTrue(countLambdas(new Mlp(8, 2, new int[] {4, 4}), CastCategory.PASS_THROUGH) >= 2);
        Block custom = new Mlp(8, 2, new int[] {4}, (NDList x) -> x);
        assertEquals(
                CastCategory.FP32,
                PrecisionPolicy.mixedBfloat16()
                        .categoryOf(custom.getChildren().get(2).getValue(), "03LambdaBlock"));
    }
}
