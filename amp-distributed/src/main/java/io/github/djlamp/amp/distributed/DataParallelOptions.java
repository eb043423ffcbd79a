package io.github.djlamp.amp.distributed;

import io.github.djlamp.amp.train.GradientReducer;
import java.time.Duration;
import java.util.Objects;

/**
 * How {@link DataParallel#configure(io.github.djlamp.amp.train.AmpTrainingConfig, World,
 * DataParallelOptions)} trains across ranks: which gradient reducer averages the ranks' gradients
 * (MPI all-reduces in buckets by default) and how long a collective may wait for the other ranks.
 *
 * <pre>{@code
 * DataParallelOptions options = DataParallelOptions.builder()
 *         .gradientReducer(new MyNcclAllReduce(world))   // in place of BucketedAllReduce
 *         .collectiveTimeout(Duration.ofMinutes(10))
 *         .build();
 * }</pre>
 */
public final class DataParallelOptions {

    private final long bucketBytes;
    private final GradientReducer gradientReducer;
    private final Duration collectiveTimeout;

    private DataParallelOptions(Builder builder) {
        bucketBytes = builder.bucketBytes;
        gradientReducer = builder.gradientReducer;
        collectiveTimeout = builder.collectiveTimeout;
    }

    /**
     * Returns the defaults: {@link BucketedAllReduce} in 25 MiB buckets, and the deadline the
     * {@link World} was created with.
     *
     * @return the default options
     */
    public static DataParallelOptions defaults() {
        return builder().build();
    }

    /**
     * Returns a builder starting from the defaults.
     *
     * @return a builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Returns the bucket size of the default reducer.
     *
     * @return bytes per bucket of {@link BucketedAllReduce}; 0 for one all-reduce per parameter
     */
    public long getBucketBytes() {
        return bucketBytes;
    }

    /**
     * Returns the reducer given to the builder.
     *
     * @return the reducer, or null for {@link BucketedAllReduce} over the world
     */
    public GradientReducer getGradientReducer() {
        return gradientReducer;
    }

    /**
     * Returns the deadline of one collective given to the builder.
     *
     * @return the deadline, or null to keep the world's ({@value World#TIMEOUT_PROPERTY}, read once
     *     when the world was created, or {@value World#DEFAULT_TIMEOUT_SECONDS} s)
     */
    public Duration getCollectiveTimeout() {
        return collectiveTimeout;
    }

    /**
     * The reducer to train with over {@code world}: the one given, else the bucketed all-reduce.
     */
    GradientReducer reducerFor(World world) {
        return gradientReducer != null
                ? gradientReducer
                : new BucketedAllReduce(world, bucketBytes);
    }

    /** Builds {@link DataParallelOptions}. */
    public static final class Builder {

        private long bucketBytes = BucketedAllReduce.DEFAULT_BUCKET_BYTES;
        private boolean bucketBytesSet;
        private GradientReducer gradientReducer;
        private Duration collectiveTimeout;

        private Builder() {}

        /**
         * Sets the bucket size of the default reducer, {@link BucketedAllReduce}.
         *
         * @param bytes bytes per bucket; 0 for one all-reduce per parameter
         * @return this builder
         * @throws IllegalArgumentException when {@code bytes} is negative
         */
        public Builder bucketBytes(long bytes) {
            if (bytes < 0) {
                throw new IllegalArgumentException(
                        "bucketBytes must be >= 0 (0: one all-reduce per parameter), got " + bytes);
            }
            bucketBytes = bytes;
            bucketBytesSet = true;
            return this;
        }

        /**
         * Sets the reducer that leaves the ranks' mean gradients in place after each step's
         * backward, instead of {@link BucketedAllReduce} (for example one that all-reduces on the
         * GPU with NCCL). The world's own collectives (the same start, the weight check, the
         * epoch's means) still run on MPI.
         *
         * @param reducer the reducer, called once per optimizer step on every rank
         * @return this builder
         * @throws NullPointerException when {@code reducer} is null
         */
        public Builder gradientReducer(GradientReducer reducer) {
            gradientReducer =
                    Objects.requireNonNull(
                            reducer,
                            "gradientReducer: pass a GradientReducer, or leave it unset for"
                                    + " BucketedAllReduce");
            return this;
        }

        /**
         * Sets how long a collective may wait for the other ranks before the job is aborted, naming
         * the ranks that never came ({@link World}). It applies to the world's collectives from
         * {@link DataParallel#configure} on, its {@link World#close()} included, in place of what
         * {@value World#TIMEOUT_PROPERTY} set when the world was created.
         *
         * @param timeout a positive duration
         * @return this builder
         * @throws IllegalArgumentException when {@code timeout} is null, zero or negative
         */
        public Builder collectiveTimeout(Duration timeout) {
            if (timeout == null || timeout.isZero() || timeout.isNegative()) {
                throw new IllegalArgumentException(
                        "collectiveTimeout must be a positive duration (for example"
                                + " Duration.ofMinutes(5)), got "
                                + timeout);
            }
            collectiveTimeout = timeout;
            return this;
        }

        /**
         * Builds the options.
         *
         * @return the options
         * @throws IllegalArgumentException when both a bucket size and a reducer were set: the
         *     bucket size is the default reducer's
         */
        public DataParallelOptions build() {
            if (bucketBytesSet && gradientReducer != null) {
                throw new IllegalArgumentException(
                        "bucketBytes sizes the default BucketedAllReduce, and a gradientReducer"
                                + " replaces it: set one of them (give your reducer its own"
                                + " bucket size)");
            }
            return new DataParallelOptions(this);
        }
    }
}
