package io.github.djlamp.amp.verify;

import ai.djl.Device;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.List;

/**
 * Records, for tests of what runs after a failed check, that a 16-bit product's kernel check found
 * it wrong, as if a platform's batched 16-bit matrix product were broken at that signature: the
 * product then runs in fp32 wherever a model meets the signature.
 */
public final class WrongProductVerdicts {

    private WrongProductVerdicts() {}

    /**
     * Records a failed check of {@code what} at this signature, in training (gradients checked).
     *
     * @param backend the engine layer the model's forward uses
     * @param what the product, as the caller names it (for example "attention scores")
     * @param left the left operand's shape
     * @param right the right operand's shape
     * @param device the device the product runs on
     * @param precision the 16-bit precision
     */
    public static void record(
            AmpBackend backend,
            String what,
            Shape left,
            Shape right,
            Device device,
            Precision precision) {
        String operation = KernelVerifier.productOperation(what, right);
        KernelVerdicts.computeIfAbsent(
                KernelVerifier.productKey(backend, operation, left, device, precision, true),
                () ->
                        new KernelVerdict(
                                operation,
                                left,
                                device,
                                precision,
                                KernelVerdict.Outcome.FP32_FALLBACK,
                                null,
                                List.of("recorded wrong by a test")));
    }

    /** Forgets every verdict, so that the next use of a signature checks it again. */
    public static void forgetAll() {
        KernelVerdicts.forgetAll();
    }
}
