/**
 * Verified, not assumed: every 16-bit convolution and linear kernel is checked against fp32 before
 * its result is used.
 *
 * <p>{@link io.github.djlamp.amp.verify.KernelVerifier} runs the check once per operation signature
 * (forward and backward, within {@link io.github.djlamp.amp.verify.ErrorBound}, the fp32 reference
 * itself against direct double-precision sums); {@link io.github.djlamp.amp.verify.KernelVerdict}
 * says what it found and what runs since (the configured layout, the other layout, or fp32); {@link
 * io.github.djlamp.amp.verify.KernelVerdicts} keeps the verdicts for the process; {@link
 * io.github.djlamp.amp.verify.CanonicalKernels} is what {@code auto} checks before it picks a
 * 16-bit precision. The casting wrapper ({@code cast}) asks for a verdict at each layer's first
 * forward per shape; nothing here depends on {@code cast}.
 */
package io.github.djlamp.amp.verify;
