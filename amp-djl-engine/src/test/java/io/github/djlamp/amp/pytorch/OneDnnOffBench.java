package io.github.djlamp.amp.pytorch;

import ai.djl.Model;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingConfig;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Arrays;
import java.util.Locale;
import java.util.Random;

/**
 * Not a test: what turning libtorch's oneDNN off costs, on DJL's {@code TrainWithOptimizers}
 * network (ResNetV1-50, 3x32x32, 10 classes, Adam, softmax cross-entropy, batch 32) with synthetic
 * CIFAR-shaped data. Run from {@code amp-djl-engine} with the test class path (bench/RESULTS.md):
 *
 * <ul>
 *   <li>{@code cost}: plain DJL fp32 training steps in one JVM, in blocks with oneDNN on, off, off,
 *       on ({@link LibtorchOneDnn#withoutOneDnn}), each 2 warm-up and 5 timed steps; prints every
 *       step's milliseconds and each block's median.
 *   <li>{@code plain} / {@code amp}: {@code STEPS} steps of plain DJL, or of djl-amp's {@code
 *       float32} after {@code Amp.configure} (run it with {@code
 *       -Ddjlamp.test.cacheTopology=hidden}: oneDNN off), printing each step's loss.
 * </ul>
 */
public final class OneDnnOffBench {

    private static final int BATCH = 32;
    private static final Shape INPUT = new Shape(BATCH, 3, 32, 32);
    private static final int WARM = 2;
    private static final int TIMED = 5;

    private OneDnnOffBench() {}

    /**
     * Runs one mode.
     *
     * @param args {@code cost}, {@code plain} or {@code amp}, then for the last two the steps
     */
    public static void main(String[] args) {
        Engine.getInstance().setRandomSeed(43);
        Block resNet50 =
                ResNetV1.builder()
                        .setImageShape(new Shape(3, 32, 32))
                        .setNumLayers(50)
                        .setOutSize(10)
                        .build();
        boolean amp = args[0].equals("amp");
        try (Model model = Model.newInstance("resnetv1", "PyTorch")) {
            Block block = amp ? Amp.wrap(resNet50, "float32") : resNet50;
            model.setBlock(block);
            TrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(Optimizer.adam().build());
            if (amp) {
                config = Amp.configure(config, block, AmpOptions.defaults());
            }
            System.out.println("oneDNN on: " + LibtorchOneDnn.get().isEnabled());
            try (Trainer trainer = model.newTrainer(config)) {
                trainer.initialize(new Shape(1, 3, 32, 32));
                Random random = new Random(43);
                if (args[0].equals("cost")) {
                    cost(trainer, random);
                } else {
                    int steps = Integer.parseInt(args[1]);
                    for (int step = 0; step < steps; step++) {
                        System.out.printf(
                                Locale.ROOT, "step %d loss %.6f%n", step, step(trainer, random));
                    }
                }
            }
        }
    }

    private static void cost(Trainer trainer, Random random) {
        LibtorchOneDnn oneDnn = LibtorchOneDnn.get();
        for (boolean on : new boolean[] {true, false, false, true}) {
            long[][] times =
                    on
                            ? block(trainer, random)
                            : oneDnn.withoutOneDnn(() -> block(trainer, random));
            System.out.printf(
                    Locale.ROOT,
                    "oneDNN %s: wall %s ms, median %d ms; thread CPU %s ms, median %d ms%n",
                    on ? "on " : "off",
                    Arrays.toString(times[0]),
                    median(times[0]),
                    Arrays.toString(times[1]),
                    median(times[1]));
        }
    }

    private static long median(long[] values) {
        long[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }

    /**
     * {@link #WARM} untimed steps, then {@link #TIMED} timed ones: their wall and the calling
     * thread's CPU milliseconds (with one intra-op thread libtorch computes on it, and the load of
     * a shared machine moves its CPU time less than its wall time).
     */
    private static long[][] block(Trainer trainer, Random random) {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long[][] times = new long[2][TIMED];
        for (int i = 0; i < WARM + TIMED; i++) {
            long start = System.nanoTime();
            long cpu = threads.getCurrentThreadCpuTime();
            step(trainer, random);
            if (i >= WARM) {
                times[0][i - WARM] = (System.nanoTime() - start) / 1_000_000;
                times[1][i - WARM] = (threads.getCurrentThreadCpuTime() - cpu) / 1_000_000;
            }
        }
        return times;
    }

    /** One training step on a synthetic batch: normal pixels, uniform labels; returns the loss. */
    private static float step(Trainer trainer, Random random) {
        float[] pixels = new float[(int) INPUT.size()];
        for (int i = 0; i < pixels.length; i++) {
            pixels[i] = (float) random.nextGaussian();
        }
        float[] labels = new float[BATCH];
        for (int i = 0; i < BATCH; i++) {
            labels[i] = random.nextInt(10);
        }
        try (NDManager batch = trainer.getManager().newSubManager()) {
            NDArray x = batch.create(pixels, INPUT);
            NDArray y = batch.create(labels);
            float value;
            try (GradientCollector collector = trainer.newGradientCollector()) {
                NDArray loss =
                        trainer.getLoss().evaluate(new NDList(y), trainer.forward(new NDList(x)));
                value = loss.getFloat();
                collector.backward(loss);
            }
            trainer.step();
            return value;
        }
    }
}
