/**
 * djl-amp: automatic mixed precision training for the Deep Java Library.
 *
 * <p>{@link io.github.djlamp.amp.Amp} is the entry point: {@code Amp.wrap(block, policy)} and
 * {@code Amp.configure(config, block)} are the two lines that give a DJL training program AMP. The
 * packages follow one training step: {@code policy} decides what runs in which precision, {@code
 * cast} wraps the block and casts weights once per step, {@code scale} holds the loss scaling state
 * machine, {@code train} is the glue into DJL's trainer (scaled loss, listener, optimizer
 * decorator, the verb API for custom loops), {@code diagnostics} reports what to change for fast
 * 16-bit compute, and {@code spi} is what an engine must provide (casts, dtype queries, PyTorch's
 * loss scaling kernels, hardware capabilities), found at run time in {@code amp-djl-engine}. {@code
 * exception} holds {@link io.github.djlamp.amp.exception.AmpException}, which all of them throw.
 */
package io.github.djlamp.amp;
