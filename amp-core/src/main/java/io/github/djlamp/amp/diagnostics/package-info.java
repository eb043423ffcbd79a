/**
 * Diagnostics for mixed precision: reports on a model that say what to change to make 16-bit
 * compute fast.
 *
 * <p>{@link io.github.djlamp.amp.diagnostics.AlignmentReport} lists, for a block, a precision
 * policy and input shapes, every layer the policy runs in 16 bits with the matrix multiplication
 * (GEMM) it turns into, whether its dimensions are multiples of 8 as GPU Tensor Cores need, and
 * what to change where they are not. It finds the layers in the tree's {@link
 * io.github.djlamp.amp.policy.ModelPlan}, as the wrapper runs them, the layers inside DJL's
 * transformer and BERT blocks included. It needs no engine for plain Linear and convolution stacks
 * and never runs the model on real data.
 */
package io.github.djlamp.amp.diagnostics;
