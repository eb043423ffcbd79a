package io.github.djlamp.amp.pytorch;

import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.loss.Loss;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;

/**
 * The program {@code OneDnnCureTest} runs in child JVMs: optionally runs a oneDNN convolution
 * first, then {@code Amp.configure} (which cures the platform where a verdict says so), and prints
 * what the cure did, what oneDNN said it runs, and the cap in force.
 */
public final class CureChild {

    private CureChild() {}

    /**
     * Runs one scenario.
     *
     * @param args {@code kernel-first} or {@code configure-first}, then {@code allowed} or {@code
     *     opted-out}
     */
    public static void main(String[] args) {
        if (args[0].equals("kernel-first")) {
            try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
                Conv2d.conv2d(
                                manager.ones(new Shape(4, 8, 16, 16)),
                                manager.ones(new Shape(8, 8, 3, 3)))
                        .singletonOrThrow()
                        .toFloatArray();
            }
        }
        Conv2d block = Conv2d.builder().setFilters(4).setKernelShape(new Shape(3, 3)).build();
        Amp.configure(
                new DefaultTrainingConfig(Loss.l2Loss()),
                Amp.wrap(block, "float32"),
                AmpOptions.builder().platformCure(args[1].equals("allowed")).build());
        System.out.println("cure-outcome=" + OneDnnCure.cureOnce(false, () -> false));
        System.out.println("cure-probe=" + OneDnnCure.lastProbe());
        System.out.println("cap-in-force=" + OneDnnIsa.capInForce());
        System.out.println("kernel-environment=" + new PtAmpBackend().kernelEnvironment());
    }
}
