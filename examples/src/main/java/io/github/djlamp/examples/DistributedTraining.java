package io.github.djlamp.examples;

import ai.djl.Model;
import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Dataset;
import ai.djl.training.evaluator.Accuracy;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.distributed.DataParallel;
import io.github.djlamp.amp.distributed.DistributedSampler;
import io.github.djlamp.amp.distributed.World;
import io.github.djlamp.examples.data.FashionMnistData;

/**
 * {@link AmpTraining} across several processes: each rank trains on its share of every global batch
 * of 64 and every rank ends with the same weights. Three changes to the AMP program: join the
 * {@link World} the launcher started, sample with a {@link DistributedSampler}, and wrap the AMP
 * configuration with {@link DataParallel#configure}. Launch it with MPI:
 *
 * <pre>
 * mvn -B -q -pl examples -am compile dependency:build-classpath -Dmdep.outputFile=cp.txt
 * mpirun -np 2 java -cp examples/target/classes:$(cat examples/cp.txt) \
 *     io.github.djlamp.examples.DistributedTraining 1024
 * </pre>
 *
 * (or {@code srun java ...} in a Slurm job: {@code examples/slurm/distributed-training.sbatch}).
 * Started without a launcher it trains as one process.
 */
public final class DistributedTraining {

    /** The batch size of one step, summed over every rank. */
    static final int GLOBAL_BATCH = 64;

    private DistributedTraining() {}

    /**
     * Trains one epoch and prints the test accuracy on rank 0.
     *
     * @param args optionally the number of training images (default all 6,000)
     * @throws Exception if the data cannot be read or a rank fails
     */
    public static void main(String[] args) throws Exception {
        int images = args.length > 0 ? Integer.parseInt(args[0]) : 6000;
        try (World world = World.init()) { // rank and size from mpirun or srun
            float accuracy = train(images, world);
            if (world.isRoot()) {
                System.out.printf(
                        "Test accuracy: %.2f%% (%d ranks, global batch %d)%n",
                        100 * accuracy, world.getSize(), GLOBAL_BATCH);
            }
        }
    }

    /**
     * Trains one epoch on {@code images} training images shared among the ranks.
     *
     * @param images how many training images to use
     * @param world the ranks
     * @return the accuracy on the test images, in [0, 1], the mean over the ranks
     * @throws Exception if the data cannot be read
     */
    static float train(int images, World world) throws Exception {
        FashionMnistData data = FashionMnistData.subset(FashionMnistData.defaultWorkDir());
        try (NDManager manager = NDManager.newBaseManager()) {
            // each rank takes GLOBAL_BATCH / ranks images of every global batch (change 2 of 3)
            FashionMnist train =
                    data.prepare(
                            data.builder(Dataset.Usage.TRAIN, GLOBAL_BATCH, images)
                                    .setSampling(
                                            new DistributedSampler(GLOBAL_BATCH, true, 42, world))
                                    .optManager(manager));
            FashionMnist test =
                    data.prepare(
                            data.builder(Dataset.Usage.TEST, 64, Math.max(64, images / 6))
                                    .optManager(manager));

            Block block =
                    ResNetV1.builder()
                            .setImageShape(new Shape(1, 28, 28))
                            .setNumLayers(20)
                            .setOutSize(10)
                            .build();
            try (Model model = Model.newInstance("resnet20")) {
                model.setBlock(Amp.wrap(block, "auto"));
                DefaultTrainingConfig config =
                        new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                                .optOptimizer(
                                        Optimizer.adam()
                                                .optLearningRateTracker(Tracker.fixed(0.001f))
                                                .build())
                                .addEvaluator(new Accuracy())
                                .addTrainingListeners(TrainingListener.Defaults.logging());

                // every rank starts from rank 0's weights and steps with the mean gradient;
                // logging and checkpoints on rank 0 only (change 3 of 3)
                try (Trainer trainer =
                        model.newTrainer(
                                DataParallel.configure(
                                        Amp.configure(config, model.getBlock()), world))) {
                    trainer.initialize(new Shape(GLOBAL_BATCH / world.getSize(), 1, 28, 28));
                    EasyTrain.fit(trainer, 1, train, test);
                    return trainer.getTrainingResult().getValidateEvaluation("Accuracy");
                }
            }
        }
    }
}
