package io.github.djlamp.amp.cast;

import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.recurrent.RecurrentBlock;
import io.github.djlamp.amp.cast.checkpoint.CheckpointPlan;
import io.github.djlamp.amp.policy.BlockPlan;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.DefaultCastRules;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.ArrayList;
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

    /** The reason a plan gives a block whose category an override of the policy set. */
    private static final String OVERRIDE = "override";

    private Fp32FallbackWarning() {}

    /**
     * Logs, after the first forward on a device, one WARN when less than half of the model's
     * arithmetic ran in 16 bits (naming the fp32 units with the most of it and what helps), one
     * WARN for fp32 islands between 16-bit layers, else one INFO line with the share. Why a unit
     * runs in fp32 and where the islands are is read from {@code plan}, the plan the shadow tree
     * that ran was built from.
     */
    static void warnIfAny(ModelPlan plan, ArithmeticShare share) {
        PrecisionPolicy concrete = plan.getPolicy();
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
                    describe(plan, share.getFp32Units()),
                    advice(plan, share.getFp32Units()));
            return;
        }
        PrecisionSummary summary = PrecisionSummary.of(plan, List.of(), CheckpointPlan.NONE);
        List<String> islands = summary.getFp32Islands();
        if (!islands.isEmpty()) {
            logger.warn(
                    "djl-amp: {} unit{} of unknown content run{} in fp32 between 16-bit layers,"
                            + " with a cast on each side: {}. A lambda whose code djl-amp cannot"
                            + " read as safe on bf16 arrays may call softmax, so it is kept in"
                            + " fp32, and in a conv net that can cost half the speed. Write"
                            + " activations as DJL's blocks (Activation.reluBlock()) or method"
                            + " references to DJL's functions (Activation::relu); a lambda of your"
                            + " own runs in 16 bits when it calls only the array operations"
                            + " djl-amp knows (README, \"Lambdas and speed\"), and one it cannot"
                            + " read belongs in a class of its own. {}",
                    islands.size(),
                    islands.size() == 1 ? "" : "s",
                    islands.size() == 1 ? "s" : "",
                    islands,
                    share);
            return;
        }
        // the share names its precision: "100.0% of 3.05 GFLOP a forward in bfloat16"
        logger.info("djl-amp: the first forward computed {}", share);
    }

    /**
     * The fp32 units with the most arithmetic, each with why it stays fp32: the plan's reason for a
     * unit the plan runs in fp32, the default rule's for one planned in 16 bits that ran in fp32 (a
     * kernel check chose fp32, the engine's autocast could not run it).
     */
    private static String describe(ModelPlan plan, List<ArithmeticShare.Unit> fp32) {
        List<String> named = new ArrayList<>();
        for (ArithmeticShare.Unit unit : fp32.subList(0, Math.min(5, fp32.size()))) {
            BlockPlan planned = plan.get(pathOf(unit));
            named.add(unit + (planned == null ? "" : ": " + reasonForFp32(planned)));
        }
        if (fp32.size() > 5) {
            named.add("and " + (fp32.size() - 5) + " more");
        }
        return String.join("; ", named);
    }

    private static String reasonForFp32(BlockPlan planned) {
        if (planned.getStrategy() == BlockPlan.Strategy.ENGINE_AUTOCAST) {
            return "planned under the engine's own autocast, which could not run it on this"
                    + " machine (the WARN before this one gives the engine's reason)";
        }
        return planned.getCategory() == CastCategory.FP32
                ? planned.getReason()
                : planned.getRuleReason();
    }

    private static String pathOf(ArithmeticShare.Unit unit) {
        return "(root)".equals(unit.getPath()) ? "" : unit.getPath();
    }

    /** The one-line change that helps the unit with the most fp32 arithmetic. */
    static String advice(ModelPlan plan, List<ArithmeticShare.Unit> fp32) {
        BlockPlan planned = fp32.isEmpty() ? null : plan.get(pathOf(fp32.get(0)));
        Block first = planned == null ? null : planned.getBlock();
        if (first == null) {
            return "";
        }
        boolean bf16 = plan.getPolicy().getComputePrecision() == Precision.BF16;
        if (planned.getCategory() == CastCategory.FP32
                && planned.getPolicyCategory() == CastCategory.FP32
                && OVERRIDE.equals(planned.getReason())) {
            return "'"
                    + (planned.getPath().isEmpty() ? "root" : planned.getPath())
                    + "' runs in fp32 because an override in the policy \""
                    + plan.getPolicy()
                    + "\" says so: remove that override to compute it in "
                    + plan.getPolicy().getComputePrecision().canonicalName()
                    + ".";
        }
        if (planned.getStrategy() == BlockPlan.Strategy.ENGINE_AUTOCAST) {
            return "Nothing to change: where the engine can run it under its autocast ("
                    + (bf16 ? "a GPU, a CPU with bf16 instructions" : "a GPU")
                    + "), it computes in 16 bits.";
        }
        if (planned.getCategory() == CastCategory.FP32 && first instanceof LambdaBlock) {
            return "A lambda whose code djl-amp cannot read as safe on bf16 arrays may call softmax,"
                    + " so it is kept in fp32: write it as a method reference to DJL's functions,"
                    + " or as array operations djl-amp knows (README, \"Lambdas and speed\"), or"
                    + " move its code into a block class of your own that implements"
                    + " io.github.djlamp.amp.policy.LowPrecisionSafe.";
        }
        if (planned.getCategory() == CastCategory.FP32
                && first.getClass().getName().startsWith("ai.djl.")) {
            // vouching for DJL's own block would put what the rule keeps in fp32 in 16 bits
            return "'"
                    + (planned.getPath().isEmpty() ? "root" : planned.getPath())
                    + "' is DJL's own "
                    + first.getClass().getSimpleName()
                    + ", which djl-amp keeps in fp32 ("
                    + planned.getReason()
                    + "): nothing to change.";
        }
        if (first instanceof RecurrentBlock) {
            return "DJL's LSTM and RNN compute in 16 bits under the engine's own autocast where the"
                    + " engine can run them so (a WARN says when it cannot); its autocast keeps GRU"
                    + " in fp32, as PyTorch's does. Nothing to change.";
        }
        if (bf16) {
            // vouching for a unit that reaches a block of unknown content is refused in bf16
            String hazard =
                    DefaultCastRules.bf16HazardIn(
                            first,
                            planned.getPath(),
                            (b, p) -> b == first || plan.getPolicy().trusts(b, p));
            if (hazard != null) {
                return "Vouching for it would be refused in bfloat16: it reaches a block djl-amp"
                        + " does not hand bf16 arrays, "
                        + hazard
                        + ". Under float16 it may be vouched for, if its own code makes its arrays"
                        + " in its input's type: Amp.wrap(block, \"mixed_float16[class:"
                        + first.getClass().getName()
                        + "=trusted]\").";
            }
        }
        String unread = DefaultCastRules.whyNotRead(first);
        String reading =
                unread == null
                                || first.getChildren().isEmpty()
                                || first.getClass().getName().startsWith("ai.djl.")
                        ? ""
                        : "djl-amp read its code and stopped: " + unread + ". ";
        String composite =
                first.getChildren().isEmpty()
                        ? ""
                        : " A composite whose code calls methods of its children or makes arrays"
                                + " of its own (a mask, a state) can run whole under the engine's"
                                + " autocast instead, checked against fp32 at its first forward"
                                + (bf16
                                        ? " (in float16: in bfloat16 unread code may end the JVM)"
                                        : "")
                                + ": Amp.wrap(block, \""
                                + (bf16 ? "mixed_float16" : plan.getPolicy().getName())
                                + "[class:"
                                + first.getClass().getName()
                                + "=autocast]\").";
        return reading
                + "For a block of your own that calls no softmax or logSoftmax, implement"
                + " io.github.djlamp.amp.policy.LowPrecisionSafe, or vouch for its class in one"
                + " line: Amp.wrap(block, \""
                + plan.getPolicy().getName()
                + "[class:"
                + first.getClass().getName()
                + "=trusted]\")."
                + composite;
    }
}
