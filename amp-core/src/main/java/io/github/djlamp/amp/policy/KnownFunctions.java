package io.github.djlamp.amp.policy;

import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import io.github.djlamp.amp.bytecode.CapturedValues;
import io.github.djlamp.amp.bytecode.KnownLambdas;
import java.util.List;

/**
 * Which DJL function a lambda block or a parallel join runs, read from class files as {@link
 * KnownLambdas} reads them: for code that must reproduce the function, not only know it is safe in
 * 16 bits (the compiled forward).
 */
public final class KnownFunctions {

    private KnownFunctions() {}

    /**
     * Returns the label of the one DJL function {@code lambda} runs ("ReLU", "batchFlatten",
     * "globalAvgPool2d", "identity", ...), or null when it cannot be told.
     *
     * @param lambda the block
     * @return the label, or null
     */
    public static String labelOf(LambdaBlock lambda) {
        return KnownLambdas.functionLabel(lambda);
    }

    /**
     * Returns the values {@code lambda}'s function captured (a factory's settings: Swish's beta),
     * in the order of the lambda object's fields, or null where they cannot be read.
     *
     * @param lambda the block
     * @return the captured values, or null
     */
    public static List<Object> capturedValues(LambdaBlock lambda) {
        return CapturedValues.of(lambda);
    }

    /**
     * Returns whether {@code block}'s join adds its two branches and applies relu (ResNetV1).
     *
     * @param block the block
     * @return whether it is ResNetV1's join
     */
    public static boolean isAddReluJoin(ParallelBlock block) {
        return KnownLambdas.isResNetJoin(block) && block.getChildren().size() == 2;
    }
}
