package io.github.djlamp.amp.diagnostics;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.verify.KernelVerdict;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * Which 16-bit layers of a model suit GPU Tensor Cores: for a block, a precision policy and input
 * shapes, every layer the policy runs in {@link CastCategory#LOW} precision with the matrix
 * multiplication (GEMM) it turns into, whether its dimensions are multiples of {@value #MULTIPLE},
 * and what to change where they are not.
 *
 * <pre>{@code
 * AlignmentReport report =
 *         AlignmentReport.of(block, PrecisionPolicy.mixedFloat16(), new Shape(64, 1, 28, 28));
 * System.out.println(report.toTable());
 * }</pre>
 *
 * <p>Tensor Cores multiply 16-bit (fp16 or bf16) tiles whose edges are multiples of 8 elements (16
 * bytes). NVIDIA's performance guides ask for M, N and K multiples of 8 for matrix multiplications
 * (a Linear layer: M = rows, i.e. the batch size for 2-d input, N = units, K = input features) and
 * for input and output channel counts multiples of 8 for convolutions (cuDNN computes them as an
 * implicit GEMM with M = batch x output positions, N = filters, K = input channels per group x
 * kernel volume, and tiles M itself). Where they are not, the library pads internally or falls back
 * to slower kernels. The same holds for fp16 and bf16; on CPUs the effect is small.
 *
 * <p>The layers are found as djl-amp's {@link MixedPrecisionBlock} runs them: from the tree's
 * {@link io.github.djlamp.amp.policy.ModelPlan}, the plan its shadow tree is built from, starting
 * at the root and descending into containers (SequentialBlock, ParallelBlock) and into the DJL
 * blocks djl-amp runs layer by layer (attention, {@code TransformerEncoderBlock}, {@code
 * BertBlock}, {@code BertPretrainingBlock}: their projections and feed-forward layers are listed);
 * a block the engine's own autocast runs whole (a TorchScript module, DJL's {@code LSTM}) is one
 * layer of {@link LayerKind#UNKNOWN} kind, and so is a block whose own code runs over its children
 * (DJL's YOLOv3), whose layers get the shapes its code hands them. Shapes are propagated with DJL's
 * {@link Block#getOutputShapes(Shape[])}: a SequentialBlock's child receives its predecessor's
 * outputs, a ParallelBlock's children all receive the block's own inputs, a transformer block's
 * layers the shapes its forward hands them. The report does not initialize, run or change the
 * block, and the block need not be initialized; if it is, each layer's weight shape is checked
 * against the input shapes. DJL finds the output shapes of lambda blocks (activations, pooling) and
 * ParallelBlock joins by running them on zero arrays, which needs an engine on the classpath; plain
 * Linear and convolution stacks need none.
 *
 * <p>Under the {@code auto} policy, LOW layers are reported as the layers that would compute in 16
 * bits; resolve it with {@link PrecisionPolicy#resolveAuto} first to see what a given device does.
 * Under {@code float32} no layer computes in 16 bits and the report is empty.
 */
public final class AlignmentReport {

    /** The multiple Tensor Cores want matrix dimensions and channel counts to be: {@value}. */
    public static final int MULTIPLE = 8;

    private final PrecisionPolicy policy;
    private final Shape[] inputShapes;
    private final List<AlignmentEntry> entries;
    private final long lowPrecisionFlops;
    private final long alignedFlops;

    private final List<KernelVerdict> kernelVerdicts;

    private AlignmentReport(
            PrecisionPolicy policy,
            Shape[] inputShapes,
            List<AlignmentEntry> entries,
            long lowPrecisionFlops,
            long alignedFlops,
            List<KernelVerdict> kernelVerdicts) {
        this.kernelVerdicts = Collections.unmodifiableList(kernelVerdicts);
        this.policy = policy;
        this.inputShapes = inputShapes;
        this.entries = Collections.unmodifiableList(entries);
        this.lowPrecisionFlops = lowPrecisionFlops;
        this.alignedFlops = alignedFlops;
    }

    /**
     * Reports on a wrapped block under its own policy.
     *
     * @param block a block as {@code Amp.wrap} returns it
     * @param inputShapes the shape of each of the model's inputs, batch size first
     * @return the report
     * @throws IllegalArgumentException as {@link #of(Block, PrecisionPolicy, Shape...)}
     */
    public static AlignmentReport of(MixedPrecisionBlock block, Shape... inputShapes) {
        if (block == null) {
            throw nullBlock();
        }
        return of(block, block.getPolicy(), inputShapes);
    }

    /**
     * Reports on a block under a policy.
     *
     * @param block the model's block, plain or a {@link MixedPrecisionBlock} (whose original is
     *     walked; {@code policy} is used either way)
     * @param policy the policy that decides which layers compute in 16 bits
     * @param inputShapes the shape of each of the model's inputs, batch size first, e.g. {@code new
     *     Shape(64, 1, 28, 28)}
     * @return the report
     * @throws IllegalArgumentException when the block or policy is null, no input shapes are given,
     *     a shape has an unknown or non-positive dimension, a layer receives a shape of the wrong
     *     rank or too small for its kernel, or an initialized layer was initialized for other input
     *     channels or features; the message names the layer and what to pass instead
     * @throws IllegalStateException when shapes must be propagated through a block DJL can only run
     *     on zeros (a lambda block, a ParallelBlock join) and no engine is on the classpath
     */
    public static AlignmentReport of(Block block, PrecisionPolicy policy, Shape... inputShapes) {
        if (block == null) {
            throw nullBlock();
        }
        if (policy == null) {
            throw new IllegalArgumentException(
                    "The precision policy is null: pass the policy the model trains with, e.g."
                            + " PrecisionPolicy.mixedFloat16()");
        }
        Shape[] shapes = checkInputShapes(inputShapes);
        Block root =
                block instanceof MixedPrecisionBlock
                        ? ((MixedPrecisionBlock) block).getOriginal()
                        : block;
        List<LowPrecisionLayers.Found> found = LowPrecisionLayers.find(root, policy, shapes);
        long total = 0;
        long aligned = 0;
        for (LowPrecisionLayers.Found f : found) {
            total = Math.addExact(total, f.gemm.flops());
            if (f.gemm.status() == AlignmentStatus.ALIGNED) {
                aligned = Math.addExact(aligned, f.gemm.flops());
            }
        }
        List<AlignmentEntry> entries = new ArrayList<>(found.size());
        for (int i = 0; i < found.size(); i++) {
            LowPrecisionLayers.Found f = found.get(i);
            boolean outputLayer = i == found.size() - 1;
            double share = total == 0 ? 0 : (double) f.gemm.flops() / total;
            String suggestion =
                    f.gemm.status() == AlignmentStatus.ALIGNED
                            ? ""
                            : Suggestions.of(f.gemm, f.readsModelInput, outputLayer, share);
            entries.add(new AlignmentEntry(f, outputLayer, share, suggestion));
        }
        List<KernelVerdict> verdicts =
                block instanceof MixedPrecisionBlock
                        ? ((MixedPrecisionBlock) block).getKernelVerdicts()
                        : Collections.emptyList();
        return new AlignmentReport(policy, shapes, entries, total, aligned, verdicts);
    }

    private static IllegalArgumentException nullBlock() {
        return new IllegalArgumentException(
                "The block is null: pass the model's block (model.getBlock()), plain or as"
                        + " Amp.wrap returns it");
    }

    private static Shape[] checkInputShapes(Shape[] inputShapes) {
        if (inputShapes == null || inputShapes.length == 0) {
            throw new IllegalArgumentException(
                    "No input shapes: pass the shape of each of the model's inputs with the batch"
                            + " size first, e.g. new Shape(64, 1, 28, 28) for batches of 64"
                            + " one-channel 28x28 images");
        }
        for (int i = 0; i < inputShapes.length; i++) {
            Shape shape = inputShapes[i];
            if (shape == null) {
                throw new IllegalArgumentException(
                        "Input shape " + i + " is null: pass one shape per model input");
            }
            for (int d = 0; d < shape.dimension(); d++) {
                if (shape.get(d) < 1) {
                    throw new IllegalArgumentException(
                            "Input shape "
                                    + shape
                                    + " has size "
                                    + shape.get(d)
                                    + " at index "
                                    + d
                                    + ": the report needs concrete positive sizes (DJL writes -1"
                                    + " for unknown ones); give the batch size and image or"
                                    + " sequence sizes you train with");
                }
            }
        }
        return inputShapes.clone();
    }

    /**
     * Returns what djl-amp's kernel checks decided for the layers of a wrapped block that have run
     * (empty for a plain block, or before the first forward).
     *
     * @return the verdicts, in the order checked
     */
    public List<KernelVerdict> getKernelVerdicts() {
        return kernelVerdicts;
    }

    /**
     * Returns the policy the report was made under.
     *
     * @return the policy
     */
    public PrecisionPolicy getPolicy() {
        return policy;
    }

    /**
     * Returns the model's input shapes the report was made for.
     *
     * @return a copy of the input shapes
     */
    public Shape[] getInputShapes() {
        return inputShapes.clone();
    }

    /**
     * Returns one entry per 16-bit layer, in forward order (the children of a ParallelBlock in
     * DJL's order).
     *
     * @return an unmodifiable list
     */
    public List<AlignmentEntry> getEntries() {
        return entries;
    }

    /**
     * Returns the entries that are not {@link AlignmentStatus#ALIGNED}: misaligned ones and those
     * of unknown kind.
     *
     * @return a new list, in forward order
     */
    public List<AlignmentEntry> getNotAligned() {
        return entries.stream().filter(e -> !e.isAligned()).collect(Collectors.toList());
    }

    /**
     * Returns how many 16-bit layers are {@link AlignmentStatus#ALIGNED}.
     *
     * @return the count
     */
    public int getAlignedCount() {
        return count(AlignmentStatus.ALIGNED);
    }

    /**
     * Returns how many 16-bit layers are {@link AlignmentStatus#MISALIGNED}.
     *
     * @return the count
     */
    public int getMisalignedCount() {
        return count(AlignmentStatus.MISALIGNED);
    }

    /**
     * Returns how many 16-bit layers are of unknown kind.
     *
     * @return the count
     */
    public int getUnknownCount() {
        return count(AlignmentStatus.UNKNOWN);
    }

    private int count(AlignmentStatus status) {
        return (int) entries.stream().filter(e -> e.getStatus() == status).count();
    }

    /**
     * Returns the FLOPs of one forward pass of all 16-bit layers of known kind.
     *
     * @return the sum of {@code 2 * M * N * K}
     */
    public long getLowPrecisionFlops() {
        return lowPrecisionFlops;
    }

    /**
     * Returns the FLOPs of one forward pass of the aligned 16-bit layers.
     *
     * @return the sum of {@code 2 * M * N * K} over aligned layers
     */
    public long getAlignedFlops() {
        return alignedFlops;
    }

    /**
     * Returns the fraction of the 16-bit FLOPs that run on aligned shapes.
     *
     * @return between 0 and 1; 1 when no 16-bit layer of known kind exists (nothing is misaligned)
     */
    public double getAlignedFlopFraction() {
        return lowPrecisionFlops == 0 ? 1.0 : (double) alignedFlops / lowPrecisionFlops;
    }

    /**
     * Returns a one-line summary: counts and the aligned share of the 16-bit FLOPs.
     *
     * @return e.g. {@code 21 of 22 16-bit layers aligned, 1 misaligned, 0 unknown; 99.8% of 16-bit
     *     FLOPs on aligned shapes}
     */
    public String getSummary() {
        if (entries.isEmpty()) {
            return "No layer computes in 16 bits under " + policy.getName() + ": nothing to align";
        }
        return String.format(
                Locale.ROOT,
                "%d of %d 16-bit layers aligned, %d misaligned, %d unknown; %s of 16-bit FLOPs"
                        + " (%s a forward pass) on aligned shapes",
                getAlignedCount(),
                entries.size(),
                getMisalignedCount(),
                getUnknownCount(),
                Suggestions.percent(getAlignedFlopFraction()),
                AlignmentTable.flops(lowPrecisionFlops));
    }

    /**
     * Returns the report as an aligned text table: a title, one row per 16-bit layer (path, layer,
     * M, N, K, in and out channels, share of FLOPs, aligned or not, suggestion), a legend and the
     * {@link #getSummary() summary}. Numbers that are not multiples of 8 are marked {@code *}.
     *
     * @return the table, lines separated by {@code \n}
     */
    public String toTable() {
        return AlignmentTable.table(this);
    }

    /**
     * Returns the entries as CSV with a header line: path, layer, kind, status, m, n, k,
     * in_channels, out_channels, groups, the five aligned flags, flops, flop_share, suggestion.
     * Fields unknown for a layer of unknown kind are empty.
     *
     * @return the CSV text, lines separated by {@code \n}
     */
    public String toCsv() {
        return AlignmentTable.csv(this);
    }

    /**
     * Returns {@link #toTable()}.
     *
     * @return the table
     */
    @Override
    public String toString() {
        return toTable();
    }
}
