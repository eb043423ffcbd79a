package io.github.djlamp.amp.cast;

import ai.djl.nn.Block;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Warns, when a policy is resolved for a device, where a model meant to compute in 16 bits keeps
 * running in fp32: most of it (blocks djl-amp cannot look into), or units between 16-bit layers
 * that cost a cast on each side.
 */
final class Fp32FallbackWarning {

    // under the wrapper's name, where a user configuring djl-amp's logging looks for it
    private static final Logger logger = LoggerFactory.getLogger(MixedPrecisionBlock.class);

    private Fp32FallbackWarning() {}

    /** Logs one WARN when the model computes mostly in fp32 or has fp32 islands; else a DEBUG. */
    static void warnIfAny(Block original, PrecisionPolicy concrete) {
        if (concrete.getComputePrecision() == Precision.FP32) {
            return;
        }
        PrecisionSummary summary = PrecisionSummary.of(original, concrete);
        if (summary.isMostlyFp32()) {
            logger.warn(
                    "djl-amp: little of this model computes in {}; blocks djl-amp cannot look into"
                            + " run in fp32 (implement io.github.djlamp.amp.policy.LowPrecisionSafe"
                            + " on your own block, or vouch for its class in one line:"
                            + " Amp.wrap(block, \"{}[class:com.example.MyBlock=trusted]\")). {}",
                    concrete.getComputePrecision().canonicalName(),
                    concrete.getName(),
                    summary);
            return;
        }
        List<String> islands = summary.getFp32Islands();
        if (!islands.isEmpty()) {
            logger.warn(
                    "djl-amp: {} unit{} of unknown content run{} in fp32 between 16-bit layers,"
                            + " with a cast on each side: {}. A lambda djl-amp cannot look into"
                            + " may call softmax, so it is kept in fp32, and in a conv net that can"
                            + " cost half the speed. Write activations as DJL's named blocks:"
                            + " add(Activation.reluBlock()) instead of add(Activation::relu), or"
                            + " new LambdaBlock(Activation::relu, \"ReLU\"). {}",
                    islands.size(),
                    islands.size() == 1 ? "" : "s",
                    islands.size() == 1 ? "s" : "",
                    islands,
                    summary);
        } else if (logger.isDebugEnabled()) {
            logger.debug("djl-amp: {}", summary);
        }
    }
}
