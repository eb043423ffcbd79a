package io.github.djlamp.amp.pytorch;

import java.util.Map;

/**
 * DJL composites (blocks with a forward of their own, not engine code) that libtorch's autocast may
 * run whole: read in DJL 0.36.0's source, every operation of their forward either is one whose
 * dtype libtorch's autocast decides, or runs on arrays autocast leaves in fp32, and no Java code
 * reads the data type of an array autocast may make 16-bit into a JNI call (the bf16 traps that end
 * the JVM). Matched by exact class name: a subclass may override the forward, and the engine module
 * needs no dependency on the DJL artifact that holds the class.
 */
final class AutocastSafeComposites {

    /** Class name to the reason it is safe, as read in DJL 0.36.0's source. */
    private static final Map<String, String> SAFE =
            Map.of(
                    "ai.djl.timeseries.model.deepar.DeepARTrainingNetwork",
                    "DeepAR's training forward: MeanScaler/NopScaler, FeatureEmbedder's Embeddings,"
                            + " slicing, concat and the lagged-sequence stack run on the fp32"
                            + " targets and features (ops autocast leaves in fp32); the 16-bit"
                            + " arrays are DJL's LSTM's outputs (already run under autocast) and"
                            + " ArgProj's Linear outputs, on which its domain map calls only"
                            + " softPlus, add(scalar), squeeze and setName: no data type read"
                            + " into JNI",
                    "ai.djl.basicmodelzoo.tabular.TabNet",
                    "TabNet's forward: its Linear layers (autocast's 16 bits), BatchNorm and"
                            + " GhostBatchNorm (batch_norm with fp32 parameters on a 16-bit input;"
                            + " split and stack), the GLU lambdas (slices, sigmoid, mul), relu,"
                            + " SparseMax (argSort to int64, oneHot made in fp32, exp, mul, sum,"
                            + " div) and its priors made by ones(shape) in fp32: no data type of a"
                            + " 16-bit array read into JNI");

    private AutocastSafeComposites() {}

    /**
     * Whether a block of this class may run whole under libtorch's autocast.
     *
     * @param type the block's class
     * @return true for a listed class, exactly
     */
    static boolean contains(Class<?> type) {
        return SAFE.containsKey(type.getName());
    }
}
