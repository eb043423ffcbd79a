/**
 * The glue into DJL's training loop, one piece per moment of a step: {@link
 * io.github.djlamp.amp.train.ScaledLoss} (the loss backward sees), {@link
 * io.github.djlamp.amp.train.AmpTrainingListener} (the check after backward, in {@code
 * onTrainingBatch}), {@link io.github.djlamp.amp.train.LossScalingOptimizer} (skip or step), all
 * sharing one {@link io.github.djlamp.amp.train.AmpSession}, which is also the verb API for custom
 * training loops and coordinates the step. What it coordinates sits in package-private files of its
 * own: the step's verdict, the accumulation window, the trainable gradients, the state kept with
 * the model, the divergence checks, the fused-step decision. The package needs nothing of the front
 * door but {@code AmpException}: its settings come as {@link
 * io.github.djlamp.amp.train.SessionSettings}.
 */
package io.github.djlamp.amp.train;
