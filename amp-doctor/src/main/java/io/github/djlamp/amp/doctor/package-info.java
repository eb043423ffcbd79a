/**
 * The AMP doctor: trains the same model on the same data in the same order once per precision, and
 * reports what mixed precision gains on this hardware (throughput, peak memory of a training step,
 * test accuracy, loss scale and skipped steps). Only such a trial tells the real gain for a given
 * model: see {@link io.github.djlamp.amp.doctor.AmpDoctor}.
 *
 * <p>The platform check, {@link io.github.djlamp.amp.doctor.PlatformCheck}, finds the engine's
 * kernels that compute wrong or kill the JVM on this machine before a training job meets them: it
 * runs convolutions and a GEMM forward and backward in fp32, bf16 and fp16 in a child JVM, and
 * where it finds a defect, whether {@code ONEDNN_MAX_CPU_ISA=AVX2} cures it.
 */
package io.github.djlamp.amp.doctor;
