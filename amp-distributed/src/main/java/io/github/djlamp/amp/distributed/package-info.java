/**
 * Data-parallel mixed precision training across processes on MPI: the {@link
 * io.github.djlamp.amp.distributed.World} of ranks a launcher started ({@code mpirun}, {@code
 * srun}), the {@link io.github.djlamp.amp.distributed.DistributedSampler} that gives each rank its
 * share of every global batch, and {@link io.github.djlamp.amp.distributed.DataParallel}, which
 * makes every rank start from rank 0's parameters and step with the mean of all ranks' gradients.
 * {@link io.github.djlamp.amp.distributed.DataParallelOptions} names the gradient reducer (the
 * bucketed MPI all-reduce by default, any {@code GradientReducer} in its place) and the collective
 * deadline.
 */
package io.github.djlamp.amp.distributed;
