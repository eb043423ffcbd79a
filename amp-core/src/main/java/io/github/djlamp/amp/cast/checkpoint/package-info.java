/**
 * Activation checkpointing inside the casting wrapper: not part of djl-amp's API (amp-core's module
 * descriptor does not export this package; the setting a user gives is {@code
 * policy.Checkpointing}).
 *
 * <p>{@link io.github.djlamp.amp.cast.checkpoint.CheckpointPlan} resolves the setting against the
 * block tree, {@link io.github.djlamp.amp.cast.checkpoint.CheckpointedSegment} is the shadow stage
 * that runs a segment without recording, {@link
 * io.github.djlamp.amp.cast.checkpoint.CheckpointTape} recomputes it after backward, and {@link
 * io.github.djlamp.amp.cast.checkpoint.Checkpoints} is the {@code cast.internal.CheckpointControl}
 * the trainer glue drives. What it needs of the wrapper comes through two seams the wrapper
 * implements: {@link io.github.djlamp.amp.cast.checkpoint.SegmentStore} (the forward pass's casting
 * parameter store) and {@link io.github.djlamp.amp.cast.checkpoint.StageChain} (running stages in
 * order, releasing what they consumed). It imports nothing of {@code cast}: {@code cast} builds on
 * it.
 */
package io.github.djlamp.amp.cast.checkpoint;
