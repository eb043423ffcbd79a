package io.github.djlamp.amp.distributed;

import ai.djl.nn.Block;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingConfig;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Objects;

/**
 * Data-parallel mixed precision training: the one call that turns a djl-amp training configuration
 * into one that trains across the ranks of a {@link World}.
 *
 * <pre>{@code
 * World world = World.init();                                     // rank and size from mpirun/srun
 * dataset = builder.setSampling(new DistributedSampler(globalBatch, true, seed, world)).build();
 * TrainingConfig config = DataParallel.configure(Amp.configure(userConfig, model.getBlock()), world);
 * }</pre>
 *
 * <p>What the trainer made from it does: every parameter (BatchNorm's running statistics included)
 * starts from rank 0's value, whatever each rank initialized or loaded; after each step's backward
 * the gradients are averaged across ranks (in buckets by {@link BucketedAllReduce}, or by the
 * reducer {@link DataParallelOptions} names) before djl-amp's fused unscale-and-check, so every
 * rank takes the same skip decision and keeps the same loss scale; logging and checkpoint listeners
 * run on rank 0 only, and DJL's {@code SaveModelTrainingListener} is replaced there by an {@link
 * AtomicSaveModelTrainingListener}, so a job that dies mid-save keeps its previous checkpoint; at
 * the end of each epoch the ranks check that their trainable weights are still identical.
 *
 * <p>To resume, load the checkpoint ({@code model.load(directory, name)}: weights and djl-amp's
 * loss scaler state) before creating the trainer, on rank 0 or on every rank: the trainer gives
 * every rank rank 0's weights and scaler state. {@link DistributedSampler#setEpoch} on every rank
 * continues the data order.
 */
public final class DataParallel {

    private DataParallel() {}

    /**
     * Makes a djl-amp training configuration data-parallel with the default options: {@link
     * BucketedAllReduce} in 25 MiB buckets, the world's collective deadline.
     *
     * @param ampConfig the configuration returned by {@code Amp.configure}
     * @param world the ranks
     * @return the configuration to create the trainer from
     */
    public static TrainingConfig configure(AmpTrainingConfig ampConfig, World world) {
        return configure(ampConfig, world, DataParallelOptions.defaults());
    }

    /**
     * Makes a djl-amp training configuration data-parallel.
     *
     * @param ampConfig the configuration returned by {@code Amp.configure}
     * @param world the ranks
     * @param bucketBytes the all-reduce bucket size; 0 for one all-reduce per parameter
     * @return the configuration to create the trainer from
     * @throws IllegalArgumentException when {@code bucketBytes} is negative
     */
    public static TrainingConfig configure(
            AmpTrainingConfig ampConfig, World world, long bucketBytes) {
        return configure(
                ampConfig, world, DataParallelOptions.builder().bucketBytes(bucketBytes).build());
    }

    /**
     * Makes a djl-amp training configuration data-parallel with the options' gradient reducer and
     * collective deadline (the deadline applies to the world's collectives from this call on).
     *
     * @param ampConfig the configuration returned by {@code Amp.configure}
     * @param world the ranks
     * @param options the gradient reducer and the collective deadline
     * @return the configuration to create the trainer from
     * @throws NullPointerException when an argument is null
     */
    public static TrainingConfig configure(
            AmpTrainingConfig ampConfig, World world, DataParallelOptions options) {
        Objects.requireNonNull(
                ampConfig,
                "DataParallel.configure needs the configuration Amp.configure returned, got null");
        Objects.requireNonNull(
                world, "DataParallel.configure needs the World that World.init() returned");
        Objects.requireNonNull(
                options,
                "DataParallel.configure needs options: DataParallelOptions.defaults() for the"
                        + " defaults");
        if (options.getCollectiveTimeout() != null) {
            world.setTimeout(
                    options.getCollectiveTimeout(), "DataParallelOptions.collectiveTimeout");
        }
        return new DataParallelTrainingConfig(ampConfig, world, options.reducerFor(world));
    }

    /**
     * Overwrites every initialized parameter of a block with rank 0's value, and makes those not
     * initialized yet take rank 0's value when they are. {@link #configure} does this when the
     * trainer is created; a custom loop that changes parameters afterwards calls it itself.
     *
     * @param block the block
     * @param world the ranks
     */
    public static void broadcastParameters(Block block, World world) {
        BroadcastInitializer.broadcastParameters(block, world);
    }

    /**
     * Loads rank 0's optimizer state file into every rank's trainer, before the first step: rank 0
     * reads the file and broadcasts it, so the other ranks need no copy of it. Call it on every
     * rank after {@code trainer.initialize}, when resuming from a checkpoint that {@link
     * AtomicCheckpoint#save(Trainer, Path, String)} wrote (its file: {@link
     * AtomicCheckpoint#optimizerStateFile}); the ranks then continue with the same state, as the
     * uninterrupted run would.
     *
     * @param trainer this rank's trainer, configured with {@code Amp.configure}
     * @param world the ranks
     * @param file the state, read on rank 0 only
     * @throws IOException when rank 0 cannot read it or a rank cannot stage it
     * @throws AmpException on every rank when rank 0 has no such file, or as {@code
     *     AmpSession.loadOptimizerState} refuses a state
     */
    public static void loadOptimizerState(Trainer trainer, World world, Path file)
            throws IOException {
        // no state file is ever empty: empty bytes say rank 0 has none
        byte[] bytes =
                world.broadcast(
                        world.isRoot() && Files.isRegularFile(file)
                                ? Files.readAllBytes(file)
                                : new byte[0],
                        "the optimizer state");
        if (bytes.length == 0) {
            throw new AmpException(
                    "No optimizer state at "
                            + file
                            + " on rank 0: resume from a checkpoint written by"
                            + " AtomicCheckpoint.save(trainer, ...) or AtomicSaveModelTrainingListener");
        }
        Path staged = Files.createTempFile("djl-amp-optimizer-", ".state");
        try {
            Files.write(staged, bytes);
            AmpSession.of(trainer).loadOptimizerState(staged);
        } finally {
            Files.deleteIfExists(staged);
        }
    }
}
