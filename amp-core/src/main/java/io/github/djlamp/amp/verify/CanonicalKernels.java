package io.github.djlamp.amp.verify;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.training.ParameterStore;
import ai.djl.training.initializer.Initializer;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The small set of layers {@code auto} checks before it picks a 16-bit precision: convolutions with
 * 1 and 3 input channels (the stems where oneDNN's bf16 kernels were found wrong), 5x5, 3x3 and 1x1
 * kernels, and a GEMM, forward and backward, in both memory layouts.
 */
public final class CanonicalKernels {

    private static final Map<String, List<KernelVerdict>> CHECKED = new ConcurrentHashMap<>();

    private CanonicalKernels() {}

    /**
     * Returns the layers checked, each with its input shape, in the order they run.
     *
     * @return a description per canonical layer
     */
    public static List<String> describe() {
        List<String> names = new ArrayList<>();
        for (Layer layer : layers()) {
            names.add(layer.name + " on " + layer.input);
        }
        return names;
    }

    /**
     * Checks the canonical layers in {@code precision} on a device, once per process.
     *
     * @param backend the engine layer
     * @param device the device
     * @param precision bf16 or fp16
     * @param manager a manager of the engine; the check's arrays live on a sub-manager of it
     * @return one verdict per canonical layer
     */
    public static List<KernelVerdict> check(
            AmpBackend backend, Device device, Precision precision, NDManager manager) {
        return CHECKED.computeIfAbsent(
                System.identityHashCode(backend) + "|" + device + "|" + precision,
                k -> run(backend, device, precision, manager));
    }

    /**
     * Confirms a recommended 16-bit precision by checking the canonical layers in it: where any of
     * them needs the fp32 fallback (or fp32 itself is wrong), the recommendation becomes fp32 and
     * the reason says which check failed.
     *
     * @param backend the engine layer
     * @param capabilities what the device's flags say
     * @param manager a manager of the engine
     * @return {@code capabilities} when its recommendation is fp32 or its kernels pass, else the
     *     same capabilities recommending fp32
     */
    public static DeviceCapabilities confirm(
            AmpBackend backend, DeviceCapabilities capabilities, NDManager manager) {
        Precision recommended = capabilities.getRecommended();
        if (!recommended.isReduced()) {
            return capabilities;
        }
        Device device = capabilities.getDevice();
        for (KernelVerdict verdict : check(backend, device, recommended, manager)) {
            KernelVerdict.Outcome outcome = verdict.getOutcome();
            if (outcome == KernelVerdict.Outcome.FP32_FALLBACK
                    || outcome == KernelVerdict.Outcome.PLATFORM_UNSOUND) {
                String reason =
                        capabilities.getReason()
                                + ", but its "
                                + recommended.canonicalName()
                                + " kernels failed djl-amp's check ("
                                + verdict.getOperation()
                                + " on "
                                + verdict.getInputShape()
                                + ": "
                                + String.join("; ", verdict.getFindings())
                                + "): fp32 instead. "
                                + (device.isGpu()
                                        ? "Update the GPU driver and CUDA libraries."
                                        : "In the environment, "
                                                + KernelVerifier.CPU_CURE
                                                + " makes oneDNN's kernels right (PyTorch issue"
                                                + " 163347); amp-doctor's PlatformCheck"
                                                + " checks it");
                return new DeviceCapabilities(
                        device,
                        capabilities.isSupported(Precision.FP16),
                        false,
                        capabilities.isSupported(Precision.BF16),
                        false,
                        Precision.FP32,
                        reason);
            }
        }
        return capabilities;
    }

    /** Forgets the canonical checks made, with {@link KernelVerdicts#forgetAll()}. */
    static void forgetAll() {
        CHECKED.clear();
    }

    private static List<KernelVerdict> run(
            AmpBackend backend, Device device, Precision precision, NDManager manager) {
        KernelVerifier verifier = new KernelVerifier(backend);
        List<KernelVerdict> verdicts = new ArrayList<>();
        List<MemoryLayout> layouts =
                Arrays.asList(MemoryLayout.CHANNELS_LAST, MemoryLayout.CONTIGUOUS);
        for (Layer layer : layers()) {
            try (NDManager scratch = manager.newSubManager(device)) {
                Block block = layer.block;
                block.setInitializer(new Deterministic(0.5f), Parameter.Type.WEIGHT);
                block.setInitializer(new Deterministic(0.1f), Parameter.Type.BIAS);
                block.initialize(scratch, DataType.FLOAT32, layer.input);
                NDArray input =
                        new Deterministic(1f).initialize(scratch, layer.input, DataType.FLOAT32);
                input.setRequiresGradient(true);
                List<MemoryLayout> candidates =
                        layer.input.dimension() == 4 ? layouts : layouts.subList(1, 2);
                verdicts.add(
                        verifier.verdict(
                                block,
                                "(canonical) " + layer.name,
                                input,
                                new ParameterStore(scratch, false),
                                false,
                                precision,
                                candidates));
            }
        }
        return verdicts;
    }

    private static List<Layer> layers() {
        return Arrays.asList(
                new Layer("conv 5x5, 1 -> 8 channels", conv(8, 5, 2), new Shape(32, 1, 28, 28)),
                new Layer("conv 3x3, 3 -> 8 channels", conv(8, 3, 1), new Shape(2, 3, 8, 8)),
                new Layer("conv 3x3, 3 -> 16 channels", conv(16, 3, 1), new Shape(16, 3, 32, 32)),
                new Layer("conv 1x1, 64 -> 64 channels", conv(64, 1, 0), new Shape(8, 64, 16, 16)),
                new Layer(
                        "conv 1x1, 256 -> 512 channels", conv(512, 1, 0), new Shape(16, 256, 8, 8)),
                new Layer(
                        "linear 256 -> 128",
                        Linear.builder().setUnits(128).build(),
                        new Shape(64, 256)));
    }

    private static Block conv(int filters, int kernel, int pad) {
        return Conv2d.builder()
                .setFilters(filters)
                .setKernelShape(new Shape(kernel, kernel))
                .optPadding(new Shape(pad, pad))
                .build();
    }

    private static final class Layer {
        final String name;
        final Block block;
        final Shape input;

        Layer(String name, Block block, Shape input) {
            this.name = name;
            this.block = block;
            this.input = input;
        }
    }

    /**
     * Values in [-scale, scale) from the fractional parts of multiples of an irrational number: no
     * draw from the engine's random generator, whose state belongs to the user.
     */
    private static final class Deterministic implements Initializer {
        private final float scale;

        Deterministic(float scale) {
            this.scale = scale;
        }

        @Override
        public NDArray initialize(NDManager manager, Shape shape, DataType dataType) {
            NDArray steps = manager.arange(1f, shape.size() + 1f, 1f).mul(0.6180339887f);
            return steps.sub(steps.floor()).mul(2 * scale).sub(scale).reshape(shape);
        }
    }
}
