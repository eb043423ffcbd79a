package io.github.djlamp.bench;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.FusedOptimizerStep;
import io.github.djlamp.amp.spi.GradientAdjustment;
import io.github.djlamp.amp.spi.LearningRate;
import io.github.djlamp.amp.spi.UpdateCounter;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One optimizer step over a whole model's parameters: DJL's own Adam (one native update per
 * parameter, what a skip-decided-on-the-host step runs) against djl-amp's fused Adam ({@link
 * AmpBackend#fusedStep} with the {@code adam} kernel: one call for every parameter that reads the
 * overflow flag on the device and zeroes the gradients). Shapes are those of {@link
 * UnscaleBenchmark#gradientShapes}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 1,
        jvmArgsAppend = {BenchSettings.OFFLINE, BenchSettings.ONE_THREAD, BenchSettings.QUIET_LOGS})
@State(Scope.Thread)
public class OptimizerStepBenchmark {

    /** The model whose parameters are updated: {@code resnet18} or {@code resnet50}. */
    @Param({"resnet18"})
    public String model;

    private NDManager manager;
    private AmpBackend backend;
    private NDList weights;
    private NDList gradients;
    private NDList means;
    private NDList variances;
    private UpdateCounter counter;
    private NDArray foundInf;
    private Optimizer djlAdam;

    /** Creates the benchmark; JMH calls {@link #setUp()} before measuring. */
    public OptimizerStepBenchmark() {}

    /** Makes the weights, gradients and optimizer state. */
    @Setup(Level.Trial)
    public void setUp() {
        manager = NDManager.newBaseManager(Device.cpu(), "PyTorch");
        backend = AmpBackends.forManager(manager);
        weights = new NDList();
        gradients = new NDList();
        means = new NDList();
        variances = new NDList();
        for (Shape shape : UnscaleBenchmark.gradientShapes(manager, model)) {
            weights.add(manager.randomNormal(shape));
            gradients.add(manager.randomNormal(shape).mul(1e-3));
            means.add(manager.zeros(shape));
            variances.add(manager.zeros(shape));
        }
        counter =
                new UpdateCounter(
                        manager.zeros(new Shape(weights.size()), DataType.FLOAT64),
                        manager.ones(new Shape(weights.size()), DataType.FLOAT64),
                        manager.zeros(new Shape(), DataType.FLOAT64),
                        0);
        foundInf = manager.zeros(new Shape());
        djlAdam = Optimizer.adam().optLearningRateTracker(Tracker.fixed(1e-4f)).build();
    }

    /** Frees every array. */
    @TearDown(Level.Trial)
    public void tearDown() {
        manager.close();
    }

    /** DJL's Adam: one native update per parameter. */
    @Benchmark
    public void djlPerParameter() {
        for (int i = 0; i < weights.size(); i++) {
            djlAdam.update("p" + i, weights.get(i), gradients.get(i));
        }
    }

    /** djl-amp: one fused call for every parameter, skip decided on the device. */
    @Benchmark
    public void fused() {
        backend.fusedStep(
                FusedOptimizerStep.builder("adam")
                        .setting("beta1", 0.9f)
                        .setting("beta2", 0.999f)
                        .setting("epsilon", 1e-8f)
                        .parameters(weights, gradients)
                        .state(means)
                        .state(variances)
                        .learningRate(LearningRate.fixed(1e-4f))
                        .adjustment(GradientAdjustment.NONE)
                        .counter(counter)
                        .foundInf(foundInf)
                        .build());
    }
}
