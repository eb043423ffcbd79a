package io.github.djlamp.bench;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.Arrays;
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
 * One precision cast through djl-amp's engine layer ({@link AmpBackend#cast}, a TorchScript method
 * call that autograd records) against DJL's own {@link NDArray#toType(DataType, boolean)} (a direct
 * JNI call under no-grad) where DJL can express the target type: fp16 yes, bf16 no.
 *
 * <p>Every invocation closes its result, so native memory stays flat.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 1,
        jvmArgsAppend = {BenchSettings.OFFLINE, BenchSettings.ONE_THREAD, BenchSettings.QUIET_LOGS})
@State(Scope.Thread)
public class CastBenchmark {

    /**
     * The tensor cast: a small activation ({@code 64x64}) or a conv weight ({@code 256x256x3x3}).
     */
    @Param({"64x64", "256x256x3x3"})
    public String shape;

    private NDManager manager;
    private AmpBackend backend;
    private NDArray fp32;
    private NDArray fp16;
    private NDArray bf16;

    /** Creates the benchmark; JMH calls {@link #setUp()} before measuring. */
    public CastBenchmark() {}

    /** Makes the fp32 source and its fp16 and bf16 copies. */
    @Setup(Level.Trial)
    public void setUp() {
        manager = NDManager.newBaseManager(Device.cpu(), "PyTorch");
        backend = AmpBackends.forManager(manager);
        fp32 = manager.randomNormal(parseShape(shape));
        fp16 = fp32.toType(DataType.FLOAT16, true);
        bf16 = backend.cast(fp32, Precision.BF16, manager);
    }

    /** Frees every array. */
    @TearDown(Level.Trial)
    public void tearDown() {
        manager.close();
    }

    /** djl-amp: fp32 to bf16 (DJL has no way to do this). */
    @Benchmark
    public void ampFp32ToBf16() {
        backend.cast(fp32, Precision.BF16, manager).close();
    }

    /** djl-amp: bf16 back to fp32 (DJL has no way to do this). */
    @Benchmark
    public void ampBf16ToFp32() {
        backend.cast(bf16, Precision.FP32, manager).close();
    }

    /** djl-amp: fp32 to fp16. */
    @Benchmark
    public void ampFp32ToFp16() {
        backend.cast(fp32, Precision.FP16, manager).close();
    }

    /** DJL's baseline for {@link #ampFp32ToFp16()}: {@code toType(FLOAT16, false)}. */
    @Benchmark
    public void djlFp32ToFp16() {
        fp32.toType(DataType.FLOAT16, false).close();
    }

    /** djl-amp: fp16 back to fp32. */
    @Benchmark
    public void ampFp16ToFp32() {
        backend.cast(fp16, Precision.FP32, manager).close();
    }

    /** DJL's baseline for {@link #ampFp16ToFp32()}: {@code toType(FLOAT32, false)}. */
    @Benchmark
    public void djlFp16ToFp32() {
        fp16.toType(DataType.FLOAT32, false).close();
    }

    /**
     * Parses a shape written as {@code 256x256x3x3}.
     *
     * @param text the dimensions joined by {@code x}
     * @return the shape
     */
    public static Shape parseShape(String text) {
        return new Shape(Arrays.stream(text.split("x")).mapToLong(Long::parseLong).toArray());
    }
}
