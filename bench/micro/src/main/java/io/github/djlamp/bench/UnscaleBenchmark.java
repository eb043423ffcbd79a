package io.github.djlamp.bench;

import ai.djl.Device;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
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
 * Unscaling and checking a whole model's gradients: PyTorch's fused {@code
 * _amp_foreach_non_finite_check_and_unscale_} through {@link AmpBackend#unscaleAndCheck} against a
 * plain Java loop of DJL operations per array (multiply in place, {@code isInfinite}, {@code
 * isNaN}, {@code logicalOr}, {@code any}, read the flag back).
 *
 * <p>The gradients have the shapes of the trainable parameters of DJL's model-zoo {@link ResNetV1}
 * with 10 classes: 18 layers on 1x32x32 images, or 50 layers on 3x32x32. They are finite, so
 * neither variant finds an overflow. The inverse scale alternates between 0.5 and 2 from one
 * invocation to the next, so the values never drift towards underflow or overflow.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 1,
        jvmArgsAppend = {BenchSettings.OFFLINE, BenchSettings.ONE_THREAD, BenchSettings.QUIET_LOGS})
@State(Scope.Thread)
public class UnscaleBenchmark {

    /** The model whose gradients are checked: {@code resnet18} or {@code resnet50}. */
    @Param({"resnet18", "resnet50"})
    public String model;

    private NDManager manager;
    private AmpBackend backend;
    private NDList gradients;
    private NDArray foundInf;
    private NDArray half;
    private NDArray two;
    private boolean flip;

    /** Creates the benchmark; JMH calls {@link #setUp()} before measuring. */
    public UnscaleBenchmark() {}

    /** Makes one random fp32 gradient per trainable parameter of the model. */
    @Setup(Level.Trial)
    public void setUp() {
        manager = NDManager.newBaseManager(Device.cpu(), "PyTorch");
        backend = AmpBackends.forManager(manager);
        gradients = new NDList();
        long elements = 0;
        for (Shape shape : gradientShapes(manager, model)) {
            gradients.add(manager.randomNormal(shape));
            elements += shape.size();
        }
        foundInf = manager.zeros(new Shape(1));
        half = manager.create(new float[] {0.5f});
        two = manager.create(new float[] {2f});
        System.out.println(
                model + ": " + gradients.size() + " gradient arrays, " + elements + " elements");
    }

    /** Frees every array. */
    @TearDown(Level.Trial)
    public void tearDown() {
        manager.close();
    }

    /** djl-amp: one fused kernel call over the whole list, nothing read back. */
    @Benchmark
    public void fused() {
        backend.unscaleAndCheck(gradients, foundInf, nextInvScale());
    }

    /**
     * The naive loop: per array, multiply in place, test for Inf or NaN, read the flag back.
     *
     * @return whether any value was not finite
     */
    @Benchmark
    public boolean naiveLoop() {
        NDArray invScale = nextInvScale();
        boolean found = false;
        for (NDArray gradient : gradients) {
            gradient.muli(invScale);
            try (NDArray inf = gradient.isInfinite();
                    NDArray nan = gradient.isNaN();
                    NDArray bad = inf.logicalOr(nan);
                    NDArray any = bad.any()) {
                found |= any.getBoolean();
            }
        }
        return found;
    }

    private NDArray nextInvScale() {
        flip = !flip;
        return flip ? half : two;
    }

    /**
     * Returns the shapes of the trainable parameters of DJL's {@link ResNetV1} with 10 classes, by
     * building and initializing the block on a temporary sub-manager.
     *
     * @param manager the manager whose engine initializes the block; nothing stays on it
     * @param model {@code resnet18} (1x32x32 images) or {@code resnet50} (3x32x32 images)
     * @return one shape per parameter that takes a gradient, in the block's order
     */
    public static List<Shape> gradientShapes(NDManager manager, String model) {
        return parameterShapes(manager, model, Parameter::requiresGradient);
    }

    /**
     * Returns the shapes of the parameters of DJL's {@link ResNetV1} with 10 classes that {@code
     * which} accepts, by building and initializing the block on a temporary sub-manager.
     *
     * @param manager the manager whose engine initializes the block; nothing stays on it
     * @param model {@code resnet18} (1x32x32 images) or {@code resnet50} (3x32x32 images)
     * @param which the parameters to keep
     * @return one shape per kept parameter, in the block's order
     */
    public static List<Shape> parameterShapes(
            NDManager manager, String model, Predicate<Parameter> which) {
        Shape image;
        int layers;
        switch (model) {
            case "resnet18":
                image = new Shape(1, 32, 32);
                layers = 18;
                break;
            case "resnet50":
                image = new Shape(3, 32, 32);
                layers = 50;
                break;
            default:
                throw new IllegalArgumentException("Unknown model '" + model + "'");
        }
        Block block =
                ResNetV1.builder().setImageShape(image).setNumLayers(layers).setOutSize(10).build();
        List<Shape> shapes = new ArrayList<>();
        try (NDManager scratch = manager.newSubManager()) {
            block.initialize(scratch, DataType.FLOAT32, new Shape(1).addAll(image));
            for (Parameter parameter : block.getParameters().values()) {
                if (which.test(parameter)) {
                    shapes.add(parameter.getArray().getShape());
                }
            }
        }
        return shapes;
    }
}
