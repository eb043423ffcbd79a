package io.github.djlamp.amp.pytorch.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

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
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.pooling.Pool;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.train.AmpSession;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The experiment issue 42's captured step stands on: a whole djl-amp training step of a custom loop
 * (the compiled forward, the scaled loss, backward, {@code AmpSession.step()} with a fused
 * optimizer), captured once into a CUDA graph after warm-up steps and replayed on new data copied
 * into static input arrays, ends every step bitwise where the same steps run eagerly end. djl-amp
 * does not capture by itself yet; this tells, on the first GPU that runs it, whether the step as it
 * stands holds nothing that breaks a capture (a host read, a synchronization), and if it does,
 * which call (the exception names it). Replayed steps skip the step's Java code, so only what the
 * device holds is compared: the loss read after the first region, weights and running statistics.
 * One region is the whole step; two are the design of {@code docs/architecture.md} ("The captured
 * step"), with a host read between them.
 *
 * <p>Without a GPU the graph is a stand-in that runs the step again instead of replaying it: the
 * harness runs, and says so; nothing about graphs is learned.
 */
class CapturedTrainingStepProbeTest {

    private static final int WARM_UP = 3;
    private static final int STEPS = WARM_UP + 4;
    private static final int BATCH = 8;

    /** What captures each region of a step and replays it. */
    private interface StepGraph extends AutoCloseable {
        /** Captures {@code region}, then runs what was captured once. */
        void capture(int index, Runnable region);

        void replay(int index);

        @Override
        void close();
    }

    /**
     * With two regions the step is captured as issue 42 plans it for EasyTrain: forward, loss,
     * backward and {@code unscaleGradients()} in one graph, {@code AmpSession.step()} in another,
     * the loss read on the host between them (as DJL's evaluators read it) from the first graph's
     * output.
     */
    @ParameterizedTest
    @CsvSource({
        "mixed_bfloat16, sgd, 1",
        "mixed_bfloat16, adam, 1",
        "mixed_float16, sgd, 1",
        "mixed_bfloat16, sgd, 2",
        "mixed_float16, adam, 2"
    })
    void replayedStepsEndWhereEagerStepsEnd(String policy, String optimizer, int regions) {
        boolean gpu = Engine.getEngine("PyTorch").getGpuCount() > 0;
        if (!gpu) {
            System.out.println(
                    "CapturedTrainingStepProbeTest: DJL sees no GPU on this machine: the graph is"
                            + " a stand-in that runs each step again (only the harness is tried)");
        }
        List<List<float[]>> eager = train(policy, optimizer, regions, null);
        List<List<float[]>> captured =
                train(
                        policy,
                        optimizer,
                        regions,
                        gpu ? new CudaStepGraph(regions) : new RerunStandIn(regions));
        for (int step = 0; step < STEPS; step++) {
            assertEquals(eager.get(step).size(), captured.get(step).size());
            for (int i = 0; i < eager.get(step).size(); i++) {
                assertArrayEquals(
                        eager.get(step).get(i),
                        captured.get(step).get(i),
                        0f,
                        policy + " " + optimizer + ", step " + step + ", array " + i);
            }
        }
        System.out.println(
                "CapturedTrainingStepProbeTest: "
                        + policy
                        + " "
                        + optimizer
                        + " in "
                        + regions
                        + " region(s): "
                        + (STEPS - WARM_UP)
                        + " steps after "
                        + WARM_UP
                        + " warm-up steps bitwise the eager ones"
                        + (gpu ? ", captured once and replayed" : " (stand-in graph)"));
    }

    private static Block network() {
        return new SequentialBlock()
                .add(
                        Conv2d.builder()
                                .setKernelShape(new Shape(3, 3))
                                .optPadding(new Shape(1, 1))
                                .setFilters(16)
                                .build())
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(Pool.globalAvgPool2dBlock())
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(10).build());
    }

    /**
     * The loss read after the first region, then the weights and running statistics, after every
     * step; with a graph, the steps after the warm-up are captured once and replayed, else all run
     * eagerly.
     */
    private static List<List<float[]>> train(
            String policy, String optimizer, int regions, StepGraph graph) {
        Engine.getInstance().setRandomSeed(7);
        List<List<float[]>> states = new ArrayList<>();
        try (Model model = Model.newInstance("captured-step-probe", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(network(), policy);
            model.setBlock(block);
            Optimizer update =
                    optimizer.equals("adam")
                            ? Optimizer.adam().optLearningRateTracker(Tracker.fixed(0.01f)).build()
                            : Optimizer.sgd()
                                    .setLearningRateTracker(Tracker.fixed(0.1f))
                                    .optMomentum(0.9f)
                                    .build();
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss()).optOptimizer(update);
            if (Engine.getEngine("PyTorch").getGpuCount() > 0) {
                config.optDevices(new Device[] {Device.gpu()});
            }
            // no host read of the scaler's state inside the steps compared
            AmpOptions options =
                    AmpOptions.builder()
                            .fusedOptimizer(FusedOptimizer.ON)
                            .hostSyncInterval(1000)
                            .build();
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options))) {
                trainer.initialize(new Shape(BATCH, 3, 16, 16));
                AmpSession amp = AmpSession.of(trainer);
                NDManager manager = trainer.getManager();
                NDArray data = manager.zeros(new Shape(BATCH, 3, 16, 16));
                NDArray labels = manager.zeros(new Shape(BATCH));
                NDArray[] loss = new NDArray[1];
                Runnable forwardAndBackward =
                        () -> {
                            try (GradientCollector collector = trainer.newGradientCollector()) {
                                NDList predictions = trainer.forward(new NDList(data));
                                loss[0] =
                                        trainer.getLoss().evaluate(new NDList(labels), predictions);
                                collector.backward(loss[0]);
                            }
                        };
                List<Runnable> steps =
                        regions == 1
                                ? List.of(
                                        () -> {
                                            forwardAndBackward.run();
                                            amp.step();
                                        })
                                : List.of(
                                        () -> {
                                            forwardAndBackward.run();
                                            amp.unscaleGradients();
                                        },
                                        amp::step);
                for (int i = 0; i < STEPS; i++) {
                    try (NDManager batch = manager.newSubManager()) {
                        batch.arange(BATCH * 3f * 16 * 16)
                                .reshape(BATCH, 3, 16, 16)
                                .div(97f + i)
                                .sin()
                                .copyTo(data);
                        batch.arange(BATCH)
                                .add(i)
                                .mod(10)
                                .toType(labels.getDataType(), false)
                                .copyTo(labels);
                    }
                    float lossRead = Float.NaN;
                    for (int r = 0; r < steps.size(); r++) {
                        if (graph == null || i < WARM_UP) {
                            steps.get(r).run();
                        } else if (i == WARM_UP) {
                            graph.capture(r, steps.get(r));
                        } else {
                            graph.replay(r);
                        }
                        if (r == 0) {
                            lossRead = loss[0].getFloat(); // between the regions, as a listener
                        }
                    }
                    List<float[]> state = new ArrayList<>();
                    state.add(new float[] {lossRead});
                    for (Pair<String, Parameter> p : block.getParameters()) {
                        state.add(p.getValue().getArray().toFloatArray());
                    }
                    states.add(state);
                }
            } finally {
                if (graph != null) {
                    graph.close();
                }
            }
        }
        return states;
    }

    /** Where there is no GPU: runs each region again instead of replaying it. */
    private static final class RerunStandIn implements StepGraph {
        private final Runnable[] regions;

        RerunStandIn(int regions) {
            this.regions = new Runnable[regions];
        }

        @Override
        public void capture(int index, Runnable region) {
            regions[index] = region;
            region.run();
        }

        @Override
        public void replay(int index) {
            regions[index].run();
        }

        @Override
        public void close() {}
    }

    /**
     * libtorch's CUDA graphs as djl-amp's step graphs: one a region, on a side stream from the
     * warm-up on.
     */
    private static final class CudaStepGraph implements StepGraph {
        private final CudaStepGraphs graphs = new CudaStepGraphs();
        private final io.github.djlamp.amp.spi.StepGraph[] captured;

        CudaStepGraph(int regions) {
            captured = new io.github.djlamp.amp.spi.StepGraph[regions];
            graphs.enter(Device.gpu());
        }

        @Override
        public void capture(int index, Runnable region) {
            io.github.djlamp.amp.spi.StepGraph graph;
            try {
                graph = graphs.capture(Device.gpu(), region);
            } catch (RuntimeException e) {
                throw new AssertionError("region " + index + " failed inside the capture", e);
            }
            if (graph == null) {
                throw new AssertionError(
                        "the capture of region " + index + " was invalidated by a call in it");
            }
            captured[index] = graph;
        }

        @Override
        public void replay(int index) {
            captured[index].replay();
        }

        @Override
        public void close() {
            graphs.exit(Device.gpu()); // waits for the device first
            for (io.github.djlamp.amp.spi.StepGraph graph : captured) {
                if (graph != null) {
                    graph.close();
                }
            }
        }
    }
}
