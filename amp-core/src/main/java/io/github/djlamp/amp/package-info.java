/**
 * djl-amp: automatic mixed precision training for the Deep Java Library.
 *
 * <p>The packages follow one training step: {@code policy} decides what runs in which precision,
 * {@code spi} is what an engine must provide (casts, dtype queries, PyTorch's loss scaling kernels,
 * hardware capabilities).
 */
package io.github.djlamp.amp;
