package io.github.djlamp.amp.distributed;

import ai.djl.training.dataset.RandomAccessDataset;
import ai.djl.training.dataset.Sampler;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Random;

/**
 * Gives each rank its share of every global batch of a {@link RandomAccessDataset}.
 *
 * <p>Global batch semantics: in epoch {@code e} (counted by the calls to {@link #sample}, one per
 * pass over the dataset, from 0 or from {@link #setEpoch}), the dataset's indices are shuffled with
 * {@code new Random(seed + e)}, the same permutation on every rank, and cut into global batches of
 * {@code globalBatchSize}; the last, incomplete global batch is dropped, so every rank takes the
 * same number of steps. Rank {@code r} of {@code n} takes the {@code r}-th of the {@code n} equal,
 * contiguous slices of each global batch. The shards are disjoint and together they are the global
 * batch, so the mean of the ranks' mean losses is the global batch's mean loss, and the mean of
 * their gradients is the gradient one process would compute on the whole global batch. A world of
 * one process yields the global batches themselves: the single-process reference of a data-parallel
 * run.
 */
public final class DistributedSampler implements Sampler {

    private final int globalBatchSize;
    private final boolean shuffle;
    private final long seed;
    private final int rank;
    private final int size;
    private final World world;
    private int epoch;

    /**
     * Creates a sampler for this rank of a world.
     *
     * @param globalBatchSize the batch size of one optimizer step summed over every rank; a
     *     multiple of the world size
     * @param shuffle whether each epoch shuffles (the same way on every rank)
     * @param seed the shuffling seed, the same on every rank
     * @param world the world
     * @throws IllegalArgumentException when the global batch is not positive or not a multiple of
     *     the world size
     */
    public DistributedSampler(int globalBatchSize, boolean shuffle, long seed, World world) {
        this(globalBatchSize, shuffle, seed, world.getRank(), world.getSize(), world);
    }

    /**
     * Creates a sampler for rank {@code rank} of {@code size}.
     *
     * @param globalBatchSize the batch size summed over every rank; a multiple of {@code size}
     * @param shuffle whether each epoch shuffles
     * @param seed the shuffling seed, the same on every rank
     * @param rank this process's rank
     * @param size the number of ranks
     * @throws IllegalArgumentException when the numbers do not fit together
     */
    public DistributedSampler(int globalBatchSize, boolean shuffle, long seed, int rank, int size) {
        this(globalBatchSize, shuffle, seed, rank, size, null);
    }

    private DistributedSampler(
            int globalBatchSize, boolean shuffle, long seed, int rank, int size, World world) {
        if (size < 1 || rank < 0 || rank >= size) {
            throw new IllegalArgumentException(
                    "rank must be in [0, size) and size >= 1, got rank " + rank + " of " + size);
        }
        if (globalBatchSize < 1 || globalBatchSize % size != 0) {
            throw new IllegalArgumentException(
                    "The global batch size must be a positive multiple of the number of ranks ("
                            + size
                            + "), got "
                            + globalBatchSize
                            + "; each rank takes globalBatchSize / ranks examples a step");
        }
        this.globalBatchSize = globalBatchSize;
        this.shuffle = shuffle;
        this.seed = seed;
        this.rank = rank;
        this.size = size;
        this.world = world;
    }

    /**
     * Returns the number of examples this rank takes from each global batch.
     *
     * @return globalBatchSize / ranks
     */
    @Override
    public int getBatchSize() {
        return globalBatchSize / size;
    }

    /**
     * Returns the batch size of one step summed over every rank.
     *
     * @return the global batch size
     */
    public int getGlobalBatchSize() {
        return globalBatchSize;
    }

    /**
     * Returns the number of steps of one epoch (complete global batches).
     *
     * @param dataset the dataset
     * @return steps per epoch, the same on every rank
     */
    public long stepsPerEpoch(RandomAccessDataset dataset) {
        return dataset.size() / globalBatchSize;
    }

    /**
     * Returns the epoch the next pass over the dataset shuffles for.
     *
     * @return the number of passes made, or the epoch set
     */
    public int getEpoch() {
        return epoch;
    }

    /**
     * Makes the next pass over the dataset the one of epoch {@code epoch}: a run resumed after
     * {@code k} epochs calls {@code setEpoch(k)}, the same on every rank, to continue with the
     * order the uninterrupted run would have taken.
     *
     * @param epoch the number of epochs already trained
     * @throws IllegalArgumentException when {@code epoch} is negative
     */
    public void setEpoch(int epoch) {
        if (epoch < 0) {
            throw new IllegalArgumentException("epoch must be >= 0, got " + epoch);
        }
        this.epoch = epoch;
    }

    /**
     * Every rank must cut the same dataset into the same global batches, or they take different
     * numbers of steps and the collectives stop pairing up: compared across the ranks (one
     * collective an epoch) when the sampler has its world.
     */
    private void requireSameSizeOnEveryRank(long total) {
        if (world == null || world.getSize() == 1) {
            return;
        }
        long[] extremes = world.allReduceMax(new long[] {total, -total}, "the dataset's size");
        if (extremes[0] != total || -extremes[1] != total) {
            throw new IllegalArgumentException(
                    "The ranks' datasets differ in size: "
                            + total
                            + " examples on rank "
                            + rank
                            + ", between "
                            + -extremes[1]
                            + " and "
                            + extremes[0]
                            + " across the ranks, so they would take different numbers of steps."
                            + " Give every rank the same whole dataset: the DistributedSampler"
                            + " gives each rank its share.");
        }
    }

    /** {@inheritDoc} */
    @Override
    public Iterator<List<Long>> sample(RandomAccessDataset dataset) {
        int total = Math.toIntExact(dataset.size());
        requireSameSizeOnEveryRank(total);
        if (total < globalBatchSize) {
            throw new IllegalArgumentException(
                    "The dataset has "
                            + total
                            + " examples, fewer than one global batch of "
                            + globalBatchSize
                            + ": every epoch would train 0 steps and leave the weights as they"
                            + " are (the incomplete last global batch is dropped so that every"
                            + " rank takes the same steps). Give the DistributedSampler a global"
                            + " batch of at most "
                            + total
                            + " (a multiple of the "
                            + (globalBatchSize / getBatchSize())
                            + " ranks), or more data.");
        }
        List<Long> order = new ArrayList<>(total);
        for (long i = 0; i < total; i++) {
            order.add(i);
        }
        if (shuffle) {
            Collections.shuffle(order, new Random(seed + epoch));
        }
        epoch++;
        int steps = total / globalBatchSize;
        int local = getBatchSize();
        return new Iterator<>() {
            private int step;

            @Override
            public boolean hasNext() {
                return step < steps;
            }

            @Override
            public List<Long> next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                int from = step * globalBatchSize + rank * local;
                step++;
                return new ArrayList<>(order.subList(from, from + local));
            }
        };
    }
}
