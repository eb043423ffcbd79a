package io.github.djlamp.amp.diagnostics;

import ai.djl.ndarray.types.Shape;

/**
 * One layer a precision policy runs in 16 bits: its matrix dimensions, whether they suit Tensor
 * Cores, and what to change where they do not. Immutable; made by {@link AlignmentReport}.
 *
 * <p>For a {@link LayerKind#LINEAR} layer the in and out channels are its input features (K) and
 * units (N); for a {@link LayerKind#CONVOLUTION} they are the input channels and the filters, and
 * they are judged per group. For a {@link LayerKind#UNKNOWN} layer only the path, name, inputs and
 * suggestion are known.
 */
public final class AlignmentEntry {

    private final String path;
    private final String layerName;
    private final Shape[] inputShapes;
    private final LayerGemm gemm;
    private final boolean readsModelInput;
    private final boolean outputLayer;
    private final double flopShare;
    private final String suggestion;

    AlignmentEntry(
            LowPrecisionLayers.Found found,
            boolean outputLayer,
            double flopShare,
            String suggestion) {
        this.path = found.path;
        this.layerName = found.block.getClass().getSimpleName();
        this.inputShapes = found.inputs.clone();
        this.gemm = found.gemm;
        this.readsModelInput = found.readsModelInput;
        this.outputLayer = outputLayer;
        this.flopShare = flopShare;
        this.suggestion = suggestion;
    }

    /**
     * Returns the layer's block path, as {@link io.github.djlamp.amp.policy.BlockPaths} writes it
     * and as path overrides of a {@link io.github.djlamp.amp.policy.PrecisionPolicy} name it.
     *
     * @return the path, {@code ""} for the root
     */
    public String getPath() {
        return path;
    }

    /**
     * Returns the simple class name of the layer's block.
     *
     * @return e.g. {@code Conv2d} or {@code Linear}
     */
    public String getLayerName() {
        return layerName;
    }

    /**
     * Returns what kind of layer this is, which says how its GEMM is read.
     *
     * @return the kind
     */
    public LayerKind getKind() {
        return gemm.kind;
    }

    /**
     * Returns whether the dimensions Tensor Cores need aligned are multiples of 8: M, N and K for a
     * Linear layer; the input and output channels per group for a convolution.
     *
     * @return the status
     */
    public AlignmentStatus getStatus() {
        return gemm.status();
    }

    /**
     * Returns whether the layer is {@link AlignmentStatus#ALIGNED}.
     *
     * @return true when nothing needs to change
     */
    public boolean isAligned() {
        return getStatus() == AlignmentStatus.ALIGNED;
    }

    /**
     * Returns whether the layer's matrix dimensions are known, i.e. its kind is not {@link
     * LayerKind#UNKNOWN}.
     *
     * @return true for Linear layers and convolutions
     */
    public boolean isKnown() {
        return gemm.kind != LayerKind.UNKNOWN;
    }

    /**
     * Returns the GEMM the layer turns into for the report's input shapes.
     *
     * @return M, N and K
     * @throws IllegalStateException for a layer of unknown kind
     */
    public GemmShape getGemmShape() {
        requireKnown("GEMM shape");
        return gemm.gemm;
    }

    /**
     * Returns the layer's input channels: the input features for a Linear layer, the input channels
     * (all groups) for a convolution.
     *
     * @return the input channels
     * @throws IllegalStateException for a layer of unknown kind
     */
    public long getInChannels() {
        requireKnown("input channels");
        return gemm.inChannels;
    }

    /**
     * Returns the layer's output channels: the units of a Linear layer, the filters of a
     * convolution.
     *
     * @return the output channels
     * @throws IllegalStateException for a layer of unknown kind
     */
    public long getOutChannels() {
        requireKnown("output channels");
        return gemm.outChannels;
    }

    /**
     * Returns the convolution's groups.
     *
     * @return the groups; 1 for a Linear layer or a layer of unknown kind
     */
    public int getGroups() {
        return gemm.groups;
    }

    /**
     * Returns whether the input channels per group are a multiple of 8.
     *
     * @return false for a layer of unknown kind
     */
    public boolean isInChannelsAligned() {
        return gemm.inChannelsAligned();
    }

    /**
     * Returns whether the output channels per group are a multiple of 8.
     *
     * @return false for a layer of unknown kind
     */
    public boolean isOutChannelsAligned() {
        return gemm.outChannelsAligned();
    }

    /**
     * Returns the FLOPs of one forward pass of the layer, {@code 2 * M * N * K}.
     *
     * @return the FLOPs; 0 for a layer of unknown kind
     */
    public long getFlops() {
        return gemm.flops();
    }

    /**
     * Returns the layer's share of the FLOPs of all 16-bit layers of known kind in the report.
     *
     * @return a fraction between 0 and 1
     */
    public double getFlopShare() {
        return flopShare;
    }

    /**
     * Returns whether the layer's input is the model's input (so it can be padded but not widened
     * through a previous layer).
     *
     * @return true for the first layer on a path from the model's input
     */
    public boolean readsModelInput() {
        return readsModelInput;
    }

    /**
     * Returns whether this is the last 16-bit layer in forward order, taken to be the output layer
     * whose width (e.g. the number of classes) the task sets.
     *
     * @return true for the last entry of the report
     */
    public boolean isOutputLayer() {
        return outputLayer;
    }

    /**
     * Returns the shapes the layer receives.
     *
     * @return a copy of the input shapes
     */
    public Shape[] getInputShapes() {
        return inputShapes.clone();
    }

    /**
     * Returns what to change, in words, e.g. {@code pad in-channels 3 -> 8 with zero channels in
     * the input}; several suggestions are joined by {@code "; "}.
     *
     * @return the suggestion, {@code ""} when nothing needs to change
     */
    public String getSuggestion() {
        return suggestion;
    }

    /**
     * Returns one line describing the entry.
     *
     * @return e.g. {@code 01Linear Linear M=32 N=64 K=100 MISALIGNED: batch size ...}
     */
    @Override
    public String toString() {
        return LayerNames.displayPath(path)
                + " "
                + layerName
                + (isKnown() ? " " + gemm.gemm : "")
                + " "
                + getStatus()
                + (suggestion.isEmpty() ? "" : ": " + suggestion);
    }

    private void requireKnown(String what) {
        if (!isKnown()) {
            throw new IllegalStateException(
                    "The "
                            + what
                            + " of "
                            + layerName
                            + " at '"
                            + path
                            + "' is not known: the report reads Linear layers and convolutions"
                            + " only; check isKnown() first");
        }
    }
}
