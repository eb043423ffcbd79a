package io.github.djlamp.amp.cast;

import ai.djl.nn.Block;
import ai.djl.nn.recurrent.RecurrentBlock;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.DefaultCastRules;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
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

    /**
     * Logs, after the first forward on a device, one WARN when less than half of the model's
     * arithmetic ran in 16 bits (naming the fp32 units with the most of it and what helps), one
     * WARN for fp32 islands between 16-bit layers, else one INFO line with the share.
     */
    static void warnIfAny(Block original, PrecisionPolicy concrete, ArithmeticShare share) {
        if (concrete.getComputePrecision() == Precision.FP32) {
            return;
        }
        String low = concrete.getComputePrecision().canonicalName();
        if (share.isMostlyFp32()) {
            logger.warn(
                    "djl-amp: little of this model's arithmetic ran in {} in its first forward ({});"
                            + " most ran in fp32, in: {}. {}",
                    low,
                    share,
                    describe(original, share.getFp32Units()),
                    advice(original, concrete, share.getFp32Units()));
            return;
        }
        PrecisionSummary summary = PrecisionSummary.of(original, concrete);
        List<String> islands = summary.getFp32Islands();
        if (!islands.isEmpty()) {
            logger.warn(
                    "djl-amp: {} unit{} of unknown content run{} in fp32 between 16-bit layers,"
                            + " with a cast on each side: {}. A lambda djl-amp cannot look into"
                            + " may call softmax, so it is kept in fp32, and in a conv net that can"
                            + " cost half the speed. Write activations as DJL's blocks"
                            + " (Activation.reluBlock()) or method references to DJL's functions"
                            + " (Activation::relu), and keep lambdas of your own in a class of"
                            + " their own. {}",
                    islands.size(),
                    islands.size() == 1 ? "" : "s",
                    islands.size() == 1 ? "s" : "",
                    islands,
                    share);
            return;
        }
        logger.info("djl-amp: {} of this model's arithmetic ran in {}", share, low);
    }

    /** The fp32 units with the most arithmetic, each with why it stays fp32. */
    private static String describe(Block original, List<ArithmeticShare.Unit> fp32) {
        Map<String, Block> blocks = BlockPaths.walk(original);
        List<String> named = new ArrayList<>();
        for (ArithmeticShare.Unit unit : fp32.subList(0, Math.min(5, fp32.size()))) {
            Block block = blocks.get(pathOf(unit));
            named.add(unit + (block == null ? "" : ": " + DefaultCastRules.reasonFor(block)));
        }
        if (fp32.size() > 5) {
            named.add("and " + (fp32.size() - 5) + " more");
        }
        return String.join("; ", named);
    }

    private static String pathOf(ArithmeticShare.Unit unit) {
        return "(root)".equals(unit.getPath()) ? "" : unit.getPath();
    }

    /** The one-line change that helps the unit with the most fp32 arithmetic. */
    private static String advice(
            Block original, PrecisionPolicy concrete, List<ArithmeticShare.Unit> fp32) {
        Block first = fp32.isEmpty() ? null : BlockPaths.walk(original).get(pathOf(fp32.get(0)));
        if (first == null) {
            return "";
        }
        if (first instanceof RecurrentBlock) {
            return "DJL's LSTM and RNN compute in 16 bits under the engine's own autocast where the"
                    + " engine can run them so (a WARN says when it cannot); its autocast keeps GRU"
                    + " in fp32, as PyTorch's does. Nothing to change.";
        }
        return "For a block of your own that calls no softmax or logSoftmax, implement"
                + " io.github.djlamp.amp.policy.LowPrecisionSafe, or vouch for its class in one"
                + " line: Amp.wrap(block, \""
                + concrete.getName()
                + "[class:"
                + first.getClass().getName()
                + "=trusted]\").";
    }
}
