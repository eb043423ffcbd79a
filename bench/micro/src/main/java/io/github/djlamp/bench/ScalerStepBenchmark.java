package io.github.djlamp.bench;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.scale.GradientSet;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
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
 * The loss scaler's share of a training step (unscale and check every gradient, then the scale
 * update): the verdict read on the host every step, against the state kept on the device and read
 * every 100 steps ({@link LossScaler#onDevice}, the fused optimizer path). On a CPU the host read
 * waits for nothing, so this shows what the device-side bookkeeping costs in calls, not what it
 * saves on a GPU. The scale is 1 so that repeated unscaling leaves the gradients as they are.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 1,
        jvmArgsAppend = {BenchSettings.OFFLINE, BenchSettings.ONE_THREAD, BenchSettings.QUIET_LOGS})
@State(Scope.Thread)
public class ScalerStepBenchmark {

    /** The model whose gradients are checked: {@code resnet18} or {@code resnet50}. */
    @Param({"resnet18"})
    public String model;

    private NDManager manager;
    private GradientSet gradients;
    private LossScaler hostRead;
    private LossScaler onDevice;

    /** Creates the benchmark; JMH calls {@link #setUp()} before measuring. */
    public ScalerStepBenchmark() {}

    /** Makes the gradients and both scalers. */
    @Setup(Level.Trial)
    public void setUp() {
        manager = NDManager.newBaseManager(Device.cpu(), "PyTorch");
        AmpBackend backend = AmpBackends.forManager(manager);
        gradients = new GradientSet();
        int i = 0;
        for (Shape shape : UnscaleBenchmark.gradientShapes(manager, model)) {
            gradients.add("p" + i++, manager.randomNormal(shape).mul(1e-3));
        }
        LossScaling scaling = LossScaling.dynamicBuilder().initScale(1f).minScale(1f).build();
        hostRead = LossScaler.onHost(scaling, backend, manager, Device.cpu());
        onDevice = LossScaler.onDevice(scaling, backend, manager, Device.cpu(), 100);
    }

    /** Frees every array. */
    @TearDown(Level.Trial)
    public void tearDown() {
        hostRead.close();
        onDevice.close();
        manager.close();
    }

    /**
     * The verdict read on the host every step (DJL's per-parameter optimizer path).
     *
     * @return the verdict, for JMH to consume
     */
    @Benchmark
    public boolean hostReadEveryStep() {
        return step(hostRead);
    }

    /**
     * The state on the device, read every 100 steps (the fused optimizer path).
     *
     * @return the verdict as far as the host knows it, for JMH to consume
     */
    @Benchmark
    public boolean stateOnDevice() {
        return step(onDevice);
    }

    private boolean step(LossScaler scaler) {
        try (NDManager step = manager.newSubManager()) {
            boolean skip = scaler.unscaleAndCheck(gradients, step);
            scaler.update();
            return skip;
        }
    }
}
