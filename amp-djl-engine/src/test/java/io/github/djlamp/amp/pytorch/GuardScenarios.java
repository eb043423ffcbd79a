package io.github.djlamp.amp.pytorch;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;

/**
 * Child-JVM program for {@link GuardTest}: each scenario must throw a Java exception where DJL
 * would terminate the JVM. Prints one line per scenario and "ALL GUARDS HELD" at the end.
 */
public final class GuardScenarios {

    private GuardScenarios() {}

    /**
     * Runs the scenarios; with the argument {@code crash}, deliberately kills the JVM through DJL
     * to prove the harness notices.
     *
     * @param args {@code crash} for the negative control
     */
    public static void main(String[] args) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            NDArray bf16 = backend.cast(manager.ones(new Shape(2, 3)), Precision.BF16, manager);
            if (args.length > 0 && "crash".equals(args[0])) {
                System.out.println("about to pass DataType.BFLOAT16 to DJL");
                System.out.flush();
                manager.zeros(new Shape(2), DataType.BFLOAT16);
                System.out.println("DJL did not crash");
                return;
            }
            expectThrow("backward guard", () -> backend.requireDjlSafe(bf16, "backward"));
            expectThrow("softmax guard", () -> backend.requireDjlSafe(bf16, "softmax"));
            expectThrow("bf16 DataType", Precision.BF16::toDataType);
            expectThrow(
                    "integer cast",
                    () -> backend.cast(manager.create(new int[] {1}), Precision.BF16, manager));
            backend.requireDjlSafe(backend.cast(bf16, Precision.FP32, manager), "backward");
            System.out.println("fp32 passes the guard");
        }
        System.out.println("ALL GUARDS HELD");
    }

    private static void expectThrow(String scenario, Runnable action) {
        try {
            action.run();
        } catch (AmpException | UnsupportedOperationException e) {
            System.out.println(scenario + " threw: " + e.getMessage());
            return;
        }
        System.out.println(scenario + " DID NOT THROW");
        System.exit(3);
    }
}
