/**
 * What the casting wrapper shares with djl-amp's trainer glue, and nothing else: not part of
 * djl-amp's API (amp-core's module descriptor does not export this package).
 *
 * <p>{@link io.github.djlamp.amp.cast.internal.TrainingLink} is the one door, reached through
 * {@code MixedPrecisionBlock.getTrainingLink()}: the trainer's parameter store, the count of
 * training forward passes, the tree version, the step's {@link
 * io.github.djlamp.amp.cast.internal.WeightCastCache} and the {@link
 * io.github.djlamp.amp.cast.internal.BufferSnapshot} of the running statistics.
 */
package io.github.djlamp.amp.cast.internal;
