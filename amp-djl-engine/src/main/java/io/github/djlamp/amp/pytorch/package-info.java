/**
 * djl-amp's engine layer for DJL's PyTorch engine: differentiable casts between fp32, fp16 and
 * bf16, a dtype query that knows bf16, PyTorch's own GradScaler kernels, hardware capabilities, and
 * guards against the DJL paths that terminate the JVM on bf16 arrays.
 *
 * <p>DJL's PyTorch engine exposes none of this directly; everything here runs through a small
 * TorchScript module that is generated in code ({@link
 * io.github.djlamp.amp.pytorch.AmpKernelScript}) and loaded once per JVM through DJL's own module
 * loader, so no native code of ours is involved.
 */
package io.github.djlamp.amp.pytorch;
