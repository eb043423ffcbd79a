package io.github.djlamp.examples;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.GradientCollector;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.Arrays;

/**
 * Proves the engine layer works on this machine: what the hardware recommends, a differentiable
 * bf16 cast, and PyTorch's own loss-scaling kernels, each printed as it runs.
 */
public final class SmokeDemo {

    private SmokeDemo() {}

    /**
     * Runs the demo.
     *
     * @param args ignored
     */
    public static void main(String[] args) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            System.out.println(
                    "Engine: "
                            + Engine.getInstance().getEngineName()
                            + " "
                            + Engine.getInstance().getVersion());
            System.out.println("Capabilities: " + backend.capabilities(Device.cpu()));

            // 1. bf16 rounds to nearest even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
            NDArray x = manager.create(new float[] {1.00390625f, 3.14159265f, 65504f});
            NDArray bf16 = backend.cast(x, Precision.BF16, manager);
            System.out.println(
                    "fp32 "
                            + Arrays.toString(x.toFloatArray())
                            + " -> bf16 -> fp32 "
                            + Arrays.toString(
                                    backend.cast(bf16, Precision.FP32, manager).toFloatArray())
                            + " (DJL sees dtype "
                            + bf16.getDataType()
                            + ", djl-amp sees "
                            + backend.precisionOf(bf16)
                            + ")");

            // 2. The cast is recorded by autograd: the fp32 master receives an fp32 gradient.
            NDArray w = manager.create(new float[] {0.5f, -2f});
            w.setRequiresGradient(true);
            try (GradientCollector collector = Engine.getInstance().newGradientCollector()) {
                NDArray y =
                        backend.cast(
                                backend.cast(w, Precision.BF16, manager), Precision.FP32, manager);
                collector.backward(y.mul(y).sum());
            }
            System.out.println(
                    "d/dw sum(w^2) through a bf16 cast: "
                            + Arrays.toString(w.getGradient().toFloatArray())
                            + " (expected [1.0, -4.0])");

            // 3. PyTorch's GradScaler kernels: unscale and check, then update the scale.
            NDArray scale = manager.create(new float[] {65536f});
            NDArray tracker = manager.zeros(new Shape(1), DataType.INT32);
            NDArray found = manager.zeros(new Shape(1));
            NDList grads =
                    new NDList(manager.create(new float[] {65536f, Float.POSITIVE_INFINITY}));
            backend.unscaleAndCheck(grads, found, manager.create(new float[] {1f / 65536f}));
            backend.updateScale(scale, tracker, found, 2.0, 0.5, 2000);
            System.out.println(
                    "Gradient with an Inf: found_inf="
                            + found.getFloat(0)
                            + ", scale 65536 -> "
                            + scale.getFloat(0)
                            + " (GradScaler backs off by half)");
        }
        System.out.println("Smoke demo OK");
    }
}
