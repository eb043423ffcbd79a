package io.github.djlamp.amp.verify;

/**
 * Whether djl-amp checks each 16-bit kernel against fp32 before it trusts it (see {@link
 * KernelVerifier}).
 */
public enum KernelVerification {
    /**
     * Check each 16-bit convolution and linear kernel once per operation signature, at its first
     * use, and check the canonical layers before {@code auto} picks a 16-bit precision. The
     * default.
     */
    ON,
    /**
     * Trust the kernels: for platforms already verified (for example with {@code
     * io.github.djlamp.amp.doctor.PlatformCheck}), to save the first step's checking time.
     */
    OFF
}
