package io.github.djlamp.amp.spi;

/**
 * The memory layout a cast produces. Channels-last (NHWC) is what Tensor Cores and oneDNN's bf16
 * convolutions run fastest on; DJL itself only ever makes contiguous (NCHW) arrays.
 */
public enum MemoryLayout {
    /** Keep the source's layout. */
    PRESERVE,
    /** Row-major contiguous, as DJL's own arrays: safe to hand to any DJL operation. */
    CONTIGUOUS,
    /**
     * Channels-last for 4-dimensional arrays (NCHW shape, NHWC strides); arrays of other ranks keep
     * their layout.
     */
    CHANNELS_LAST
}
