/**
 * The AMP doctor: trains the same model on the same data in the same order once per precision, and
 * reports what mixed precision gains on this hardware (throughput, peak memory of a training step,
 * test accuracy, loss scale and skipped steps). Only such a trial tells the real gain for a given
 * model: see {@link io.github.djlamp.amp.doctor.AmpDoctor}.
 */
package io.github.djlamp.amp.doctor;
