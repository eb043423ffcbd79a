/**
 * The glue into DJL's training loop, one piece per moment of a step: {@link
 * io.github.djlamp.amp.train.ScaledLoss} (the loss backward sees), {@link
 * io.github.djlamp.amp.train.AmpTrainingListener} (the check after backward, in {@code
 * onTrainingBatch}), {@link io.github.djlamp.amp.train.LossScalingOptimizer} (skip or step), all
 * sharing one {@link io.github.djlamp.amp.train.AmpSession}, which is also the verb API for custom
 * training loops.
 */
package io.github.djlamp.amp.train;
