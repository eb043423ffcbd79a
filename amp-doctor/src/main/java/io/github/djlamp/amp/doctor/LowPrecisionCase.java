package io.github.djlamp.amp.doctor;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.verify.KernelVerdict;
import io.github.djlamp.amp.verify.KernelVerifier;
import java.util.List;

/**
 * A layer in 16 bits through djl-amp's cast, in one memory layout, checked by {@link
 * KernelVerifier}: forward and backward against fp32 within {@link
 * io.github.djlamp.amp.verify.ErrorBound}, and the fp32 reference against direct double-precision
 * sums.
 */
final class LowPrecisionCase extends KernelCase {

    private final LayerSpec layer;
    private final Precision precision;
    private final MemoryLayout layout;

    private LowPrecisionCase(
            LayerSpec layer, Precision precision, MemoryLayout layout, String note) {
        super(
                precision.shortName() + "-" + layoutName(layout) + "/" + layer.slug(),
                precision.shortName()
                        + " "
                        + layoutName(layout)
                        + " "
                        + layer.describe()
                        + note
                        + ": djl-amp's cast, forward and backward against fp32");
        this.layer = layer;
        this.precision = precision;
        this.layout = layout;
    }

    /** The case of a layer in a precision and a layout. */
    static LowPrecisionCase of(
            LayerSpec layer, Precision precision, MemoryLayout layout, String note) {
        return new LowPrecisionCase(layer, precision, layout, note);
    }

    LayerSpec layer() {
        return layer;
    }

    Precision precision() {
        return precision;
    }

    @Override
    Result run(Context context) {
        try (NDManager scratch = context.manager.newSubManager(context.device)) {
            Block block = layer.newBlock();
            block.setInitializer(Fp32Case.WEIGHT, Parameter.Type.WEIGHT);
            block.setInitializer(Fp32Case.BIAS, Parameter.Type.BIAS);
            block.initialize(scratch, DataType.FLOAT32, layer.input());
            NDArray input = Fp32Case.INPUT.initialize(scratch, layer.input(), DataType.FLOAT32);
            input.setRequiresGradient(true);
            KernelVerdict verdict =
                    new KernelVerifier(context.backend)
                            .verdict(
                                    block,
                                    "(platform check) " + id(),
                                    input,
                                    new ParameterStore(scratch, false),
                                    false,
                                    precision,
                                    List.of(layout));
            if (verdict.getOutcome() == KernelVerdict.Outcome.VERIFIED) {
                return Result.right(
                        "output and input, weight, bias gradients within the "
                                + precision.shortName()
                                + " bound of fp32");
            }
            String findings = String.join("; ", verdict.getFindings());
            if (verdict.getOutcome() == KernelVerdict.Outcome.NOT_CHECKED) {
                return Result.failed(findings);
            }
            return Result.wrong(verdict.getOutcome() + (findings.isEmpty() ? "" : ": " + findings));
        }
    }

    static String layoutName(MemoryLayout layout) {
        return layout == MemoryLayout.CHANNELS_LAST ? "channels-last" : "contiguous";
    }
}
