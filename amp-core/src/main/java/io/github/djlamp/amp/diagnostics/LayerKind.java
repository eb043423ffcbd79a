package io.github.djlamp.amp.diagnostics;

/** What kind of layer an {@link AlignmentEntry} describes, which decides how its GEMM is read. */
public enum LayerKind {
    /**
     * A {@code ai.djl.nn.core.Linear} layer: M = rows (the product of the input's leading
     * dimensions), N = units, K = input features. Tensor Cores want M, N and K to be multiples of
     * 8.
     */
    LINEAR,

    /**
     * A {@code ai.djl.nn.convolutional.Convolution} (Conv1d, Conv2d, Conv3d) as an implicit GEMM: M
     * = batch x output positions, N = filters, K = input channels per group x kernel volume.
     * cuDNN's Tensor Core kernels want the input and output channels (per group) to be multiples of
     * 8; M is tiled by cuDNN and shown for information only.
     */
    CONVOLUTION,

    /** Any other block the policy runs in 16 bits: its matrix dimensions are not known. */
    UNKNOWN
}
