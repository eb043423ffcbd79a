package io.github.djlamp.amp.diagnostics;

/** Whether a 16-bit layer's dimensions suit Tensor Cores. */
public enum AlignmentStatus {
    /** Every dimension Tensor Cores need aligned is a multiple of 8. */
    ALIGNED,
    /** At least one dimension Tensor Cores need aligned is not a multiple of 8. */
    MISALIGNED,
    /** The layer is not a Linear or a convolution: its matrix dimensions are not known. */
    UNKNOWN
}
