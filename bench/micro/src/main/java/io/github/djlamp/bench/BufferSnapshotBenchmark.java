package io.github.djlamp.bench;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
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
 * A step's care for BatchNorm's running statistics on the device-resident path (fp16 with the fused
 * optimizer): copy them before the forward pass, put them back where the step overflowed. One array
 * at a time through DJL (a new copy per statistic, then a broadcast and a {@code where} each), as
 * djl-amp did before, against two multi-array calls into persistent copies ({@code
 * AmpBackend.copy}, {@code AmpBackend.restoreWhere}). The flag is clean, so both leave the
 * statistics as they are. On a CPU this is what the calls cost; on a GPU each call is also a kernel
 * launch.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 1,
        jvmArgsAppend = {BenchSettings.OFFLINE, BenchSettings.ONE_THREAD, BenchSettings.QUIET_LOGS})
@State(Scope.Thread)
public class BufferSnapshotBenchmark {

    /** The model whose running statistics are kept: {@code resnet18} or {@code resnet50}. */
    @Param({"resnet50"})
    public String model;

    private NDManager manager;
    private AmpBackend backend;
    private NDList live;
    private NDList saved;
    private NDArray foundInf;

    /** Creates the benchmark; JMH calls {@link #setUp()} before measuring. */
    public BufferSnapshotBenchmark() {}

    /** Makes the statistics, their persistent copies and a clean flag. */
    @Setup(Level.Trial)
    public void setUp() {
        manager = NDManager.newBaseManager(Device.cpu(), "PyTorch");
        backend = AmpBackends.forManager(manager);
        live = new NDList();
        saved = new NDList();
        for (Shape shape :
                UnscaleBenchmark.parameterShapes(
                        manager,
                        model,
                        p ->
                                p.getType() == Parameter.Type.RUNNING_MEAN
                                        || p.getType() == Parameter.Type.RUNNING_VAR)) {
            live.add(manager.randomUniform(0f, 1f, shape));
            saved.add(manager.zeros(shape));
        }
        foundInf = manager.zeros(new Shape(1));
    }

    /** Frees every array. */
    @TearDown(Level.Trial)
    public void tearDown() {
        manager.close();
    }

    /**
     * One DJL call per statistic: a fresh copy before the forward, a broadcast and a {@code where}
     * after the backward, then one multi-array copy back.
     *
     * @return the number of statistics, for JMH to consume
     */
    @Benchmark
    public int perStatistic() {
        try (NDManager step = manager.newSubManager()) {
            NDList copies = new NDList(live.size());
            for (NDArray value : live) {
                NDArray copy = value.duplicate();
                copy.attach(step);
                copies.add(copy);
            }
            NDArray skip = foundInf.neq(0f).reshape(new Shape());
            skip.attach(step);
            NDList chosen = new NDList(live.size());
            for (int i = 0; i < live.size(); i++) {
                NDArray condition = skip.broadcast(live.get(i).getShape());
                condition.attach(step);
                NDArray value = NDArrays.where(condition, copies.get(i), live.get(i));
                value.attach(step);
                chosen.add(value);
            }
            backend.copy(live, chosen);
            return chosen.size();
        }
    }

    /**
     * Two multi-array calls: refill the persistent copies, then restore where the flag says.
     *
     * @return the number of statistics, for JMH to consume
     */
    @Benchmark
    public int twoCalls() {
        backend.copy(saved, live);
        backend.restoreWhere(live, saved, foundInf);
        return live.size();
    }
}
