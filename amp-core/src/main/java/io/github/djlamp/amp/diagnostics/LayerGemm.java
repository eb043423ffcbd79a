package io.github.djlamp.amp.diagnostics;

/**
 * What a calculator finds out about one 16-bit layer: its kind, its GEMM and its channels. The
 * suggestion and the layer's place in the model are added by {@link AlignmentReport}.
 */
final class LayerGemm {

    final LayerKind kind;
    final GemmShape gemm;
    final long inChannels;
    final long outChannels;
    final int groups;
    final int inputRank;

    private LayerGemm(
            LayerKind kind,
            GemmShape gemm,
            long inChannels,
            long outChannels,
            int groups,
            int inputRank) {
        this.kind = kind;
        this.gemm = gemm;
        this.inChannels = inChannels;
        this.outChannels = outChannels;
        this.groups = groups;
        this.inputRank = inputRank;
    }

    static LayerGemm linear(GemmShape gemm, int inputRank) {
        return new LayerGemm(LayerKind.LINEAR, gemm, gemm.getK(), gemm.getN(), 1, inputRank);
    }

    static LayerGemm convolution(
            GemmShape gemm, long inChannels, long outChannels, int groups, int inputRank) {
        return new LayerGemm(
                LayerKind.CONVOLUTION, gemm, inChannels, outChannels, groups, inputRank);
    }

    static LayerGemm unknown(int inputRank) {
        return new LayerGemm(LayerKind.UNKNOWN, null, -1, -1, 1, inputRank);
    }

    long inChannelsPerGroup() {
        return inChannels / groups;
    }

    long outChannelsPerGroup() {
        return outChannels / groups;
    }

    boolean inChannelsAligned() {
        return kind != LayerKind.UNKNOWN && Alignment.isAligned(inChannelsPerGroup());
    }

    boolean outChannelsAligned() {
        return kind != LayerKind.UNKNOWN && Alignment.isAligned(outChannelsPerGroup());
    }

    AlignmentStatus status() {
        return switch (kind) {
            case LINEAR ->
                    gemm.isMAligned() && gemm.isNAligned() && gemm.isKAligned()
                            ? AlignmentStatus.ALIGNED
                            : AlignmentStatus.MISALIGNED;
            case CONVOLUTION ->
                    inChannelsAligned() && outChannelsAligned()
                            ? AlignmentStatus.ALIGNED
                            : AlignmentStatus.MISALIGNED;
            case UNKNOWN -> AlignmentStatus.UNKNOWN;
        };
    }

    long flops() {
        return gemm == null ? 0 : gemm.getFlops();
    }
}
