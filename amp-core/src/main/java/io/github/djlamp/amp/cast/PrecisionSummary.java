package io.github.djlamp.amp.cast;

import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.util.Pair;
import io.github.djlamp.amp.cast.checkpoint.CheckpointPlan;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.BlockPlan;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.verify.KernelVerdict;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Which precision each unit of a model computes in under a concrete policy, and why: what Keras
 * shows as each layer's dtype policy. {@link MixedPrecisionBlock} logs it as a warning at the first
 * forward when little or none of the model's parameters compute in 16 bits (a user's own block
 * djl-amp cannot look into runs in fp32; see {@link io.github.djlamp.amp.policy.LowPrecisionSafe}).
 *
 * <p>Compute is measured by parameters: the share of the model's parameter elements that belong to
 * units computing in the 16-bit precision.
 */
public final class PrecisionSummary {

    /** Below this share of parameters in 16 bits, the first forward logs a warning. */
    public static final double WARN_BELOW_LOW_SHARE = 0.5;

    private final PrecisionPolicy policy;
    private final List<Row> rows;
    private final long lowParameters;
    private final long allParameters;

    private PrecisionSummary(PrecisionPolicy policy, List<Row> rows) {
        this.policy = policy;
        this.rows = Collections.unmodifiableList(rows);
        long low = 0;
        long all = 0;
        for (Row row : rows) {
            all += row.parameters;
            low += row.category == CastCategory.LOW ? row.parameters : 0;
        }
        this.lowParameters = low;
        this.allParameters = all;
    }

    /**
     * Summarizes a block tree under a concrete policy.
     *
     * @param root the model's block (the original, not the wrapper)
     * @param policy a policy that is not {@code auto}
     * @return the summary; parameters not yet initialized count as 0
     */
    public static PrecisionSummary of(Block root, PrecisionPolicy policy) {
        return of(root, policy, Collections.emptyList());
    }

    /**
     * Summarizes a block tree under a concrete policy and what the kernel checks decided for its
     * layers: a layer whose 16-bit kernel was wrong at every shape it ran runs fp32, and every
     * layer a check found wrong says so in its reason.
     *
     * @param root the model's block (the original, not the wrapper)
     * @param policy a policy that is not {@code auto}
     * @param verdicts the kernel checks' verdicts ({@link MixedPrecisionBlock#getKernelVerdicts()})
     * @return the summary; parameters not yet initialized count as 0
     */
    public static PrecisionSummary of(
            Block root, PrecisionPolicy policy, List<KernelVerdict> verdicts) {
        policy.getComputePrecision(); // refuses auto, which has none until resolved for a device
        return of(
                ModelPlan.of(policy, root, AmpBackends::supportEngineAutocast),
                verdicts,
                CheckpointPlan.NONE);
    }

    /** The summary with the checkpointed segments of {@code plan} marked. */
    static PrecisionSummary of(
            Block root, PrecisionPolicy policy, List<KernelVerdict> verdicts, CheckpointPlan plan) {
        return of(ModelPlan.of(policy, root, AmpBackends::supportEngineAutocast), verdicts, plan);
    }

    /**
     * The summary of the tree {@code blocks} plans (what the shadow tree built from the same plan
     * runs), with the kernel checks' verdicts and the checkpointed segments of {@code plan}.
     */
    static PrecisionSummary of(
            ModelPlan blocks, List<KernelVerdict> verdicts, CheckpointPlan plan) {
        return of(blocks, verdicts, plan, Map.of());
    }

    /**
     * The summary as {@link #of(ModelPlan, List, CheckpointPlan)} makes it, with the units the
     * engine's autocast planned that turned to fp32 ({@code fallbacks}: the reason, by path) in
     * fp32, as they ran.
     */
    static PrecisionSummary of(
            ModelPlan blocks,
            List<KernelVerdict> verdicts,
            CheckpointPlan plan,
            Map<String, String> fallbacks) {
        Block root = blocks.getRoot();
        PrecisionPolicy policy = blocks.getPolicy();
        List<Row> rows = new ArrayList<>();
        visit(blocks, "", rows);
        if (!verdicts.isEmpty()) {
            rows.replaceAll(row -> row.checked(verdicts));
        }
        if (!fallbacks.isEmpty()) {
            rows.replaceAll(row -> row.fellBack(fallbacks.get(row.path)));
        }
        if (plan.isEnabled()) {
            Map<String, Integer> segments = plan.segmentOfStage(root);
            rows.replaceAll(row -> row.inSegment(segmentOf(row.path, segments)));
        }
        return new PrecisionSummary(policy, rows);
    }

    private static int segmentOf(String path, Map<String, Integer> segments) {
        for (Map.Entry<String, Integer> e : segments.entrySet()) {
            String stage = e.getKey();
            if (path.equals(stage) || path.startsWith(stage + BlockPaths.SEPARATOR)) {
                return e.getValue();
            }
        }
        return 0;
    }

    private static void visit(ModelPlan blocks, String path, List<Row> rows) {
        BlockPlan planned = blocks.get(path);
        Block block = planned.getBlock();
        if (planned.isUnit()) {
            rows.add(
                    new Row(
                            path,
                            block,
                            planned.getCategory(),
                            parametersOf(block),
                            planned.getReason()));
            return;
        }
        for (Pair<String, Block> child : block.getChildren()) {
            visit(blocks, BlockPaths.child(path, child.getKey()), rows);
        }
        if (planned.getStrategy() == BlockPlan.Strategy.COMPOSITE
                && block instanceof ScaledDotProductAttentionBlock) {
            boolean low = planned.hasLowProducts();
            rows.add(
                    new Row(
                            path.isEmpty()
                                    ? "(attention products)"
                                    : path + " (attention products)",
                            block,
                            low ? CastCategory.LOW : CastCategory.FP32,
                            0,
                            "attention's two matrix products, in the query projection's precision;"
                                    + " softmax in fp32"));
        }
        if (planned.hasFp32Join()) {
            rows.add(
                    new Row(
                            path.isEmpty() ? "(join)" : path + " (join)",
                            block,
                            CastCategory.FP32,
                            0,
                            "join function of unknown content: its inputs are cast to fp32"));
        }
    }

    private static long parametersOf(Block block) {
        long n = 0;
        for (Pair<String, Parameter> pair : block.getParameters()) {
            Parameter p = pair.getValue();
            if (p.isInitialized()) {
                n += p.getArray().size();
            }
        }
        return n;
    }

    /**
     * Returns one row per unit djl-amp runs as a whole, in tree order.
     *
     * @return the rows
     */
    public List<Row> getRows() {
        return rows;
    }

    /**
     * Returns the share of parameter elements in units computing in 16 bits.
     *
     * @return 0 to 1; 0 for a model without initialized parameters
     */
    public double getLowShare() {
        return allParameters == 0 ? 0 : (double) lowParameters / allParameters;
    }

    /**
     * Returns whether little or none of the model computes in 16 bits under a 16-bit policy.
     *
     * @return true when the share is below {@link #WARN_BELOW_LOW_SHARE}
     */
    public boolean isMostlyFp32() {
        return policy.getComputePrecision() != Precision.FP32
                && allParameters > 0
                && getLowShare() < WARN_BELOW_LOW_SHARE;
    }

    /**
     * Returns the fp32 islands: units with no parameters (lambdas, joins) that run in fp32 between
     * two units computing in 16 bits, in tree order. Each costs a cast on each side and breaks the
     * 16-bit chain: in a conv net they can cost half the speed while nearly every parameter
     * computes in 16 bits, which {@link #getLowShare()} does not show.
     *
     * @return the islands' paths
     */
    public List<String> getFp32Islands() {
        List<String> islands = new ArrayList<>();
        for (int i = 1; i + 1 < rows.size(); i++) {
            Row row = rows.get(i);
            if (row.category != CastCategory.FP32 || row.parameters != 0) {
                continue;
            }
            if (lowNeighbour(i, -1) && lowNeighbour(i, +1)) {
                islands.add(row.path.isEmpty() ? "(root)" : row.path);
            }
        }
        return islands;
    }

    /**
     * Whether the nearest unit from {@code i} in direction {@code step} (-1 or +1) that is not
     * passed through computes in 16 bits.
     */
    private boolean lowNeighbour(int i, int step) {
        for (int j = i + step; j >= 0 && j < rows.size(); j += step) {
            if (rows.get(j).category != CastCategory.PASS_THROUGH) {
                return rows.get(j).category == CastCategory.LOW;
            }
        }
        return false;
    }

    /**
     * Returns how many units compute in fp32 (joins of unknown content included).
     *
     * @return the count of FP32 rows
     */
    public int getFp32Units() {
        int n = 0;
        for (Row row : rows) {
            n += row.category == CastCategory.FP32 ? 1 : 0;
        }
        return n;
    }

    /**
     * Returns a table: path, class, precision, parameters and reason per unit.
     *
     * @return the table, one line per unit after a header line
     */
    @Override
    public String toString() {
        String low = policy.getComputePrecision().canonicalName();
        StringBuilder sb =
                new StringBuilder(
                        policy.getComputePrecision() == Precision.FP32
                                // nothing is 16-bit: "0% of them in float32" said the opposite
                                ? String.format(
                                        Locale.ROOT,
                                        "%s: all %d parameters compute in fp32, in %d units",
                                        policy,
                                        allParameters,
                                        rows.size())
                                : String.format(
                                        Locale.ROOT,
                                        "%s: %.0f%% of %d parameters compute in %s; %d of %d units"
                                                + " in fp32",
                                        policy,
                                        100 * getLowShare(),
                                        allParameters,
                                        low,
                                        getFp32Units(),
                                        rows.size()));
        for (Row row : rows) {
            String precision =
                    row.category == CastCategory.LOW
                            ? low
                            : row.category == CastCategory.FP32 ? "fp32" : "as input";
            sb.append(
                    String.format(
                            Locale.ROOT,
                            "%n  %-40s %-28s %-8s %10d  %s",
                            row.path.isEmpty() ? "(root)" : row.path,
                            row.block.getClass().getSimpleName(),
                            precision,
                            row.parameters,
                            row.reason));
            if (row.segment > 0) {
                sb.append("  [checkpointed segment ").append(row.segment).append(']');
            }
        }
        return sb.toString();
    }

    /** One unit: a block djl-amp runs as a whole, or the join of a ParallelBlock. */
    public static final class Row {
        private final String path;
        private final Block block;
        private final CastCategory category;
        private final long parameters;
        private final String reason;
        private final int segment;

        Row(String path, Block block, CastCategory category, long parameters, String reason) {
            this(path, block, category, parameters, reason, 0);
        }

        private Row(
                String path,
                Block block,
                CastCategory category,
                long parameters,
                String reason,
                int segment) {
            this.path = path;
            this.block = block;
            this.category = category;
            this.parameters = parameters;
            this.reason = reason;
            this.segment = segment;
        }

        /** This row inside checkpointed segment {@code number} (from 1). */
        Row inSegment(int number) {
            return new Row(path, block, category, parameters, reason, number);
        }

        /** This row as the kernel checks of its layer leave it. */
        Row checked(List<KernelVerdict> verdicts) {
            if (category != CastCategory.LOW) {
                return this;
            }
            String name = path.isEmpty() ? "root" : path;
            List<String> findings = new ArrayList<>();
            boolean anyLow = false;
            boolean anyChecked = false;
            for (KernelVerdict verdict : verdicts) {
                if (!verdict.getPaths().contains(name)) {
                    continue;
                }
                anyChecked = true;
                anyLow |= verdict.runsLowPrecision();
                if (verdict.isDefectFound()) {
                    findings.add(
                            "kernel check at input "
                                    + verdict.getInputShape()
                                    + ": "
                                    + verdict.getOutcome()
                                    + ", runs "
                                    + verdict.describeChoice());
                }
            }
            if (findings.isEmpty()) {
                return this;
            }
            CastCategory now = anyChecked && !anyLow ? CastCategory.FP32 : category;
            return new Row(path, block, now, parameters, String.join("; ", findings), segment);
        }

        /** This row in fp32 for {@code reason}, where the engine's autocast could not run it. */
        Row fellBack(String reason) {
            if (reason == null || category != CastCategory.LOW) {
                return this;
            }
            return new Row(
                    path,
                    block,
                    CastCategory.FP32,
                    parameters,
                    "the engine's autocast could not run it here, so it runs in fp32: " + reason,
                    segment);
        }

        /**
         * Returns the unit's path ({@code "(join)"} appended for a join).
         *
         * @return the path
         */
        public String getPath() {
            return path;
        }

        /**
         * Returns the block.
         *
         * @return the block
         */
        public Block getBlock() {
            return block;
        }

        /**
         * Returns the unit's category under the policy.
         *
         * @return LOW, FP32 or PASS_THROUGH
         */
        public CastCategory getCategory() {
            return category;
        }

        /**
         * Returns the number of parameter elements of the unit.
         *
         * @return the count, 0 before initialization
         */
        public long getParameters() {
            return parameters;
        }

        /**
         * Returns why the unit has its category: an override, or the default rule.
         *
         * @return the reason
         */
        public String getReason() {
            return reason;
        }

        /**
         * Returns the checkpointed segment the unit runs in ({@code AmpOptions} checkpointing): its
         * activations are recomputed after backward instead of kept.
         *
         * @return the segment's number, from 1 in forward order; 0 when the unit is not in one
         */
        public int getCheckpointSegment() {
            return segment;
        }
    }
}
