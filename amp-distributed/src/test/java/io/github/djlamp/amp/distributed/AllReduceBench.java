package io.github.djlamp.amp.distributed;

import ai.djl.Model;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.scale.GradientSet;
import io.github.djlamp.amp.train.AmpSession;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * Measures the gradient all-reduce of ResNet-50 (DJL's ResNetV1-50, 224x224, 1000 classes: 25.6 M
 * fp32 gradients in 161 parameters) across the ranks of an mpirun job, bucketed (25 MiB) against
 * one all-reduce per parameter, and a training step of the same network for scale. Run by {@code
 * bench/allreduce.sh}; rank 0 prints medians.
 *
 * <p>Arguments: {@code [REPETITIONS [STEP_BATCH]]} (10, 4; a STEP_BATCH of 0 skips the step).
 */
public final class AllReduceBench {

    private AllReduceBench() {}

    /**
     * Runs the measurements.
     *
     * @param args see the class comment
     * @throws Exception when a measurement fails
     */
    public static void main(String[] args) throws Exception {
        int repetitions = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        int stepBatch = args.length > 1 ? Integer.parseInt(args[1]) : 4;
        try (World world = World.init();
                Model model = Model.newInstance("resnet50");
                NDManager manager = NDManager.newBaseManager()) {
            model.setBlock(
                    Amp.wrap(
                            ResNetV1.builder()
                                    .setImageShape(new Shape(3, 224, 224))
                                    .setNumLayers(50)
                                    .setOutSize(1000)
                                    .build(),
                            "auto"));
            model.getBlock()
                    .initialize(
                            model.getNDManager(), model.getDataType(), new Shape(1, 3, 224, 224));
            GradientSet gradients = new GradientSet();
            long floats = 0;
            int count = 0;
            for (Pair<String, Parameter> pair : model.getBlock().getParameters()) {
                if (pair.getValue().requiresGradient()) {
                    NDArray grad = manager.randomNormal(pair.getValue().getArray().getShape());
                    gradients.add(pair.getKey(), grad);
                    floats += grad.size();
                    count++;
                }
            }
            report(
                    world,
                    String.format(
                            "ranks %d, %d gradients, %.2f M floats (%.1f MiB)",
                            world.getSize(), count, floats / 1e6, floats * 4 / 1048576.0));

            // the MPI call alone, on one buffer of every gradient: the floor
            ByteBuffer flat =
                    ByteBuffer.allocateDirect((int) floats * 4).order(ByteOrder.nativeOrder());
            double[] raw = new double[repetitions];
            for (int r = -2; r < repetitions; r++) {
                sync(world);
                long start = System.nanoTime();
                world.allReduceSum(flat, (int) floats, "bench raw");
                if (r >= 0) {
                    raw[r] = (System.nanoTime() - start) / 1e6;
                }
            }
            report(world, "one MPI_Allreduce of all gradients (102 MB, no packing): " + stats(raw));

            for (long bucket :
                    new long[] {BucketedAllReduce.DEFAULT_BUCKET_BYTES, 4L << 20, 1L << 20, 0}) {
                BucketedAllReduce reducer = new BucketedAllReduce(world, bucket);
                double[] times = new double[repetitions];
                for (int r = -2; r < repetitions; r++) {
                    sync(world);
                    try (NDManager step = manager.newSubManager()) {
                        long start = System.nanoTime();
                        reducer.reduce(gradients, step);
                        if (r >= 0) {
                            times[r] = (System.nanoTime() - start) / 1e6;
                        }
                    }
                }
                report(
                        world,
                        (bucket == 0
                                        ? "per parameter (" + count + " all-reduces)"
                                        : "bucketed "
                                                + (bucket >> 20)
                                                + " MiB ("
                                                + reducer.buckets(gradients.byReplica().get(0))
                                                        .size()
                                                + " all-reduces)")
                                + ", packing and copy-back included: "
                                + stats(times));
            }
            if (stepBatch > 0) {
                stepTime(world, model, stepBatch, repetitions);
            }
        }
    }

    /** Times forward, backward and the optimizer step, every rank at once (as in training). */
    private static void stepTime(World world, Model model, int batch, int repetitions) {
        DefaultTrainingConfig config =
                new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                        .optOptimizer(
                                Optimizer.sgd()
                                        .setLearningRateTracker(Tracker.fixed(0.01f))
                                        .build());
        try (Trainer trainer = model.newTrainer(Amp.configure(config, model.getBlock()))) {
            trainer.initialize(new Shape(batch, 3, 224, 224));
            int steps = Math.max(3, repetitions / 3);
            double[] times = new double[steps];
            for (int r = -1; r < steps; r++) {
                sync(world);
                try (NDManager step = trainer.getManager().newSubManager()) {
                    NDArray x = step.randomNormal(new Shape(batch, 3, 224, 224));
                    NDArray y = step.randomInteger(0, 1000, new Shape(batch), DataType.INT32);
                    long start = System.nanoTime();
                    try (GradientCollector collector = trainer.newGradientCollector()) {
                        NDArray loss =
                                trainer.getLoss()
                                        .evaluate(new NDList(y), trainer.forward(new NDList(x)));
                        collector.backward(loss);
                    }
                    AmpSession.of(trainer).step();
                    if (r >= 0) {
                        times[r] = (System.nanoTime() - start) / 1e6;
                    }
                }
            }
            report(
                    world,
                    "training step of ResNet-50, batch "
                            + batch
                            + " per rank, policy "
                            + AmpSession.of(trainer).getPolicy()
                            + ", every rank at once (all-reduce excluded): "
                            + stats(times));
        }
    }

    private static void sync(World world) {
        world.allReduceMax(new long[] {0}, "bench barrier");
    }

    private static String stats(double[] millis) {
        double[] sorted = millis.clone();
        Arrays.sort(sorted);
        return String.format(
                "median %.1f ms (min %.1f, max %.1f, n=%d)",
                sorted[sorted.length / 2], sorted[0], sorted[sorted.length - 1], sorted.length);
    }

    private static void report(World world, String line) {
        if (world.isRoot()) {
            System.out.println(line);
            System.out.flush();
        }
    }
}
