package io.github.djlamp.amp.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.pooling.Pool;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Which DJL function a lambda runs, as the compiled forward must reproduce it. */
class KnownFunctionsTest {

    @Test
    void djlFunctionsAreToldApart() {
        assertEquals("ReLU", label(Activation.reluBlock()));
        assertEquals("sigmoid", label(Activation.sigmoidBlock()));
        assertEquals("batchFlatten", label(Blocks.batchFlattenBlock()));
        assertEquals("batchFlatten", label(Blocks.batchFlattenBlock(12)));
        assertEquals("identity", label(Blocks.identityBlock()));
        assertEquals("globalAvgPool2d", label(Pool.globalAvgPool2dBlock()));
        assertEquals("globalMaxPool2d", label(Pool.globalMaxPool2dBlock()));
    }

    /**
     * A lambda block of this class: candidates include another site of this class (the user's
     * lambda below), so even {@code Activation::relu} written here cannot be told apart and is
     * refused, the safe way.
     */
    @Test
    void aUsersLambdaHasNoLabel() {
        assertNull(label(new SequentialBlock().add(Activation::relu)));
        assertNull(label(new LambdaBlock(list -> new NDList(list.head().mul(2)))));
    }

    /**
     * DJL's transformer blocks take an activation as a method reference: two written in one class
     * are told apart by the probe (both once stayed unlabelled, so neither compiled).
     */
    @Test
    void twoMethodReferencesOfOneClassAreToldApart() {
        SequentialBlock net = TwoActivations.network();
        assertEquals("GELU", label(net.getChildren().get(0).getValue()));
        assertEquals("sigmoid", label(net.getChildren().get(1).getValue()));
    }

    /** A class of its own: this test class's lambdas with boxed arguments would stop the probe. */
    private static final class TwoActivations {
        static SequentialBlock network() {
            return new SequentialBlock().add(Activation::gelu).add(Activation::sigmoid);
        }
    }

    @Test
    void onlyResNetsJoinIsAddAndRelu() {
        Block unit = ResNetV1.residualUnit(8, new Shape(1, 1), true, false, 0.9f);
        assertTrue(KnownFunctions.isAddReluJoin((ParallelBlock) unit));
        ParallelBlock concat =
                new ParallelBlock(
                        list -> new NDList(list.get(0).head().add(list.get(1).head())),
                        List.of(Blocks.identityBlock(), Blocks.identityBlock()));
        assertFalse(KnownFunctions.isAddReluJoin(concat));
    }

    private static String label(Block block) {
        Block lambda =
                block instanceof SequentialBlock s ? s.getChildren().get(0).getValue() : block;
        return KnownFunctions.labelOf((LambdaBlock) lambda);
    }
}
