package io.github.djlamp.amp.verify;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.Arrays;

/**
 * The program {@code RememberedVerdictsTest} runs in child JVMs: checks a right and a wrong
 * convolution in bf16 and prints, for each, one line {@code kept-verdict <name> outcome=<outcome>
 * remembered=<true|false> checked=<true|false>}.
 */
public final class KeptVerdictChild {

    private KeptVerdictChild() {}

    /**
     * Runs the two checks.
     *
     * @param args none
     */
    public static void main(String[] args) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            System.out.println(line("right", backend, conv(), manager));
            System.out.println(
                    line("wrong", backend, WrongLowPrecisionConv2d.create(8, 5, 2), manager));
        }
    }

    /** Checks {@code block} on (2, 8, 8, 8) with a fresh verifier and describes what happened. */
    static String line(String name, AmpBackend backend, Block block, NDManager manager) {
        Shape shape = new Shape(2, block instanceof WrongLowPrecisionConv2d ? 1 : 8, 8, 8);
        Engine.getInstance().setRandomSeed(11);
        block.initialize(manager, DataType.FLOAT32, shape);
        NDArray input = manager.randomNormal(0, 1, shape, DataType.FLOAT32);
        input.setRequiresGradient(true);
        KernelVerifier verifier = new KernelVerifier(backend);
        KernelVerdict verdict =
                verifier.verdict(
                        block,
                        "kept/" + name,
                        input,
                        new ParameterStore(manager, false),
                        false,
                        Precision.BF16,
                        Arrays.asList(MemoryLayout.CHANNELS_LAST, MemoryLayout.CONTIGUOUS));
        return "kept-verdict "
                + name
                + " outcome="
                + verdict.getOutcome()
                + " remembered="
                + verdict.isRemembered()
                + " checked="
                + verifier.takeChecksRun();
    }

    static Conv2d conv() {
        return Conv2d.builder()
                .setFilters(8)
                .setKernelShape(new Shape(3, 3))
                .optPadding(new Shape(1, 1))
                .build();
    }
}
