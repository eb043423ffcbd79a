package io.github.djlamp.amp.pytorch;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.pooling.Pool;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingConfig;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.spi.AmpBackends;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;

/**
 * The program {@code HiddenCacheCureTest} runs in child JVMs (oneDNN's switch is the process's, and
 * djl-amp decides once per process): {@code Amp.configure} twice, then a few SGD steps of a small
 * convolutional net with a bottleneck (1x1, 3x3, 1x1, the shape of ResNet-50's units) under
 * djl-amp's {@code float32}; prints what the cure did and whether libtorch uses oneDNN, and writes
 * the weights before and after training, in order, as floats.
 */
public final class HiddenCacheChild {

    static final int STEPS = 5;
    static final int BATCH = 8;
    static final float RATE = 0.1f;
    static final Shape INPUT = new Shape(BATCH, 3, 16, 16);

    private HiddenCacheChild() {}

    /**
     * Runs one scenario.
     *
     * @param args the weights file, then {@code allowed} or {@code opted-out}
     * @throws IOException when the weights cannot be written
     */
    public static void main(String[] args) throws IOException {
        Engine.getInstance().setRandomSeed(43);
        Block net = network();
        try (Model model = Model.newInstance("hidden-cache", "PyTorch")) {
            Block wrapped = Amp.wrap(net, "float32");
            model.setBlock(wrapped);
            AmpOptions options =
                    AmpOptions.builder().platformCure(args[1].equals("allowed")).build();
            TrainingConfig plain =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(RATE))
                                            .build());
            Amp.configure(plain, wrapped, options);
            TrainingConfig config = Amp.configure(plain, wrapped, options);
            System.out.println("cure-outcome=" + HiddenCacheCure.outcome());
            System.out.println("onednn-after-configure=" + LibtorchOneDnn.get().isEnabled());
            System.out.println("kernel-environment=" + new PtAmpBackend().kernelEnvironment());
            System.out.println(
                    "auto-on-cpu="
                            + AmpBackends.forEngine("PyTorch")
                                    .capabilities(Device.cpu())
                                    .getRecommended());
            try (Trainer trainer = model.newTrainer(config);
                    DataOutputStream out =
                            new DataOutputStream(Files.newOutputStream(Path.of(args[0])))) {
                trainer.initialize(INPUT);
                write(net, out);
                Random random = new Random(43);
                for (int step = 0; step < STEPS; step++) {
                    try (NDManager batch = trainer.getManager().newSubManager()) {
                        float[] pixels = new float[(int) INPUT.size()];
                        float[] labels = new float[BATCH];
                        for (int i = 0; i < pixels.length; i++) {
                            pixels[i] = (float) random.nextGaussian();
                        }
                        for (int i = 0; i < BATCH; i++) {
                            labels[i] = random.nextInt(10);
                        }
                        NDArray x = batch.create(pixels, INPUT);
                        NDArray y = batch.create(labels);
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            NDArray loss =
                                    trainer.getLoss()
                                            .evaluate(
                                                    new NDList(y), trainer.forward(new NDList(x)));
                            System.out.println("loss-" + step + "=" + loss.getFloat());
                            collector.backward(loss);
                        }
                        trainer.step();
                    }
                }
                write(net, out);
            }
        }
        System.out.println("onednn-after-training=" + LibtorchOneDnn.get().isEnabled());
        System.out.flush();
        // oneDNN's verbose lines (ONEDNN_VERBOSE=1) sit in C's stdout buffer when piped
        NativeLibrary.getInstance(com.sun.jna.Platform.C_LIBRARY_NAME)
                .getFunction("fflush")
                .invokeInt(new Object[] {Pointer.NULL});
    }

    /** A stem, a bottleneck with a strided 1x1 projection, a classifier. */
    static Block network() {
        return new SequentialBlock()
                .add(conv(16, 3, 1))
                .add(Activation.reluBlock())
                .add(conv(8, 1, 1))
                .add(Activation.reluBlock())
                .add(conv(8, 3, 1))
                .add(Activation.reluBlock())
                .add(conv(16, 1, 1))
                .add(Activation.reluBlock())
                .add(conv(16, 1, 2))
                .add(Pool.globalAvgPool2dBlock())
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(10).build());
    }

    private static Block conv(int filters, int kernel, int stride) {
        return Conv2d.builder()
                .setFilters(filters)
                .setKernelShape(new Shape(kernel, kernel))
                .optStride(new Shape(stride, stride))
                .optPadding(new Shape(kernel / 2, kernel / 2))
                .build();
    }

    private static void write(Block net, DataOutputStream out) throws IOException {
        for (Pair<String, ai.djl.nn.Parameter> pair : net.getParameters()) {
            for (float value : pair.getValue().getArray().toFloatArray()) {
                out.writeFloat(value);
            }
        }
    }
}
