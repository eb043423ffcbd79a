package io.github.djlamp.amp.cast;

import ai.djl.Device;
import ai.djl.nn.Block;
import io.github.djlamp.amp.policy.BlockPlan;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.LowPrecisionSafe;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one line djl-amp logs before a unit of the shadow tree first computes in bf16 on someone's
 * word: a block its author marked {@link LowPrecisionSafe}, or one the policy trusts ({@code
 * class:X=trusted}). djl-amp cannot check that word: a block that calls softmax or logSoftmax on a
 * bf16 array, or passes a bf16 array's {@code getDataType()} to DJL, ends the JVM inside DJL's
 * PyTorch engine ("terminate called without an active exception"), where no Java code runs again.
 * The line, written before the forward, is then the last one djl-amp leaves, and it names the block
 * and the fix.
 *
 * <p>Logged at INFO, not WARN: it appears on every run of a correct model, where a warning that no
 * change to the model can clear would teach users to ignore djl-amp's warnings. Logging at INFO is
 * where djl-amp's other once-a-run lines go. It must reach the log before the forward: slf4j-simple
 * writes and flushes each line before the call returns; an asynchronous appender may not.
 */
final class TrustBreadcrumb {

    // under the wrapper's name, where a user configuring djl-amp's logging looks for it
    private static final Logger logger = LoggerFactory.getLogger(MixedPrecisionBlock.class);

    /** A block inside the unit that computes in 16 bits on someone's word, and whose word. */
    record Vouched(String path, Block block, String voucher) {}

    private final String unitPath;
    private final Block unit;
    private final List<Vouched> vouched;

    private TrustBreadcrumb(String unitPath, Block unit, List<Vouched> vouched) {
        this.unitPath = unitPath;
        this.unit = unit;
        this.vouched = List.copyOf(vouched);
    }

    /**
     * Returns the breadcrumb of a unit, or null when the unit does not compute in bf16 on anyone's
     * word: the policy computes in another precision, the unit runs in fp32, or everything in it is
     * a block djl-amp's rules know (DJL's convolutions, linear layers, BatchNorm and the like). The
     * blocks vouched for are the plan's ({@link BlockPlan#getVouchedFor()}): nothing here decides
     * them again.
     *
     * @param planned the plan of the block the stage runs as one unit
     * @param policy the concrete policy the plan was made under, which says whose word it is
     */
    static TrustBreadcrumb of(BlockPlan planned, PrecisionPolicy policy) {
        if (planned.getVouchedFor().isEmpty()) {
            return null;
        }
        List<Vouched> vouched = new ArrayList<>();
        for (Map.Entry<String, Block> e : planned.getVouchedFor().entrySet()) {
            vouched.add(
                    new Vouched(
                            e.getKey(), e.getValue(), voucher(e.getValue(), e.getKey(), policy)));
        }
        return new TrustBreadcrumb(planned.getPath(), planned.getBlock(), vouched);
    }

    /** Who vouched for a block the plan lists as vouched for: the policy's trust comes first. */
    private static String voucher(Block block, String path, PrecisionPolicy policy) {
        if (policy.trusts(block, path)) {
            return "the policy (" + trustOverride(block, path, policy) + ")";
        }
        return "its author (LowPrecisionSafe)";
    }

    /** The override that makes the policy trust the block, as the policy string writes it. */
    private static String trustOverride(Block block, String path, PrecisionPolicy policy) {
        if (policy.getPathOverrides().get(path) == CastCategory.TRUSTED) {
            return "path:" + path + "=trusted";
        }
        Map<Class<? extends Block>, CastCategory> byClass = policy.getClassOverrides();
        for (Class<?> c = block.getClass(); c != null; c = c.getSuperclass()) {
            if (byClass.containsKey(c)) {
                return "class:" + c.getName() + "=trusted";
            }
        }
        return "trusted";
    }

    /**
     * Returns the blocks of the unit that compute in 16 bits on someone's word, in tree order.
     *
     * @return the vouched-for blocks, the unit itself first when it is one
     */
    List<Vouched> vouched() {
        return vouched;
    }

    /** Logs the line, for the first bf16 forward of the unit on {@code device} (null: unknown). */
    void log(Device device) {
        logger.info(message(device));
    }

    /** The line: the block, its class, whose word, what a JVM ending here means and the fix. */
    String message(Device device) {
        return "djl-amp: first bfloat16 forward"
                + (device == null ? "" : " on " + device)
                + " of "
                + subject()
                + ", not checked by djl-amp. If the JVM ends right after this line with \"terminate"
                + " called without an active exception\", that code called softmax or logSoftmax on"
                + " a bf16 array or passed a bf16 array's getDataType() to DJL (as in ones(shape,"
                + " x.getDataType())). Fix: "
                + fix()
                + ", or cast to fp32 inside the block before such calls (AmpBackend.cast;"
                + " NDArray.toType records no gradient)";
    }

    private boolean unitIsTheOnlyVouched() {
        return vouched.size() == 1 && vouched.get(0).path().equals(unitPath);
    }

    private String subject() {
        if (unitIsTheOnlyVouched()) {
            return describe(unitPath, unit)
                    + ", in 16 bits on the word of "
                    + vouched.get(0).voucher();
        }
        return describe(unitPath, unit)
                + ", in 16 bits on the word given "
                + vouched.stream()
                        .map(v -> "for " + describe(v.path(), v.block()) + " by " + v.voucher())
                        .collect(Collectors.joining(", "));
    }

    /** Keeping the unit in fp32: by its class where it is the block vouched for, else by path. */
    private String fix() {
        if (unitIsTheOnlyVouched() || unitPath.isEmpty()) {
            return "keep "
                    + (unitPath.isEmpty() ? "the root block" : "it")
                    + " in fp32 with class:"
                    + unit.getClass().getName()
                    + "=fp32"
                    + (unitPath.isEmpty() ? "" : " or path:" + unitPath + "=fp32")
                    + " in the policy (PrecisionPolicy.Builder.overrideClass or overridePath with"
                    + " CastCategory.FP32)";
        }
        return "keep '"
                + unitPath
                + "' in fp32 with path:"
                + unitPath
                + "=fp32 in the policy (PrecisionPolicy.Builder.overridePath with"
                + " CastCategory.FP32)";
    }

    private static String describe(String path, Block block) {
        return (path.isEmpty() ? "the root block" : "'" + path + "'")
                + " ("
                + block.getClass().getName()
                + ")";
    }
}
