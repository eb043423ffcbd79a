/**
 * Loss scaling: the configuration ({@link io.github.djlamp.amp.scale.LossScaling}) and the state
 * machine that runs it on PyTorch's own GradScaler kernels ({@link
 * io.github.djlamp.amp.scale.LossScaler}), with its state read on the host every step or kept on
 * the device and read now and then.
 *
 * <p>fp16 holds magnitudes down to 2^-24 only, so small gradients underflow to zero. Multiplying
 * the loss by a scale S before backward multiplies every gradient by S; the gradients are divided
 * by S again before the optimizer sees them. A dynamic scale starts high (2^16), halves and skips
 * the step whenever a gradient overflows to Inf/NaN, and doubles after a run of clean steps.
 */
package io.github.djlamp.amp.scale;
