package io.github.djlamp.amp.cast;

import ai.djl.ndarray.types.DataType;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.util.Pair;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;

/**
 * Refuses 16-bit master weights: djl-amp keeps masters in fp32 and casts them itself, and 16-bit
 * masters would lose every small update. The parameters are checked at the first forward, and again
 * after the tree changes or parameters are loaded.
 */
final class Fp32Masters {

    private final Block original;
    private volatile boolean checked;

    Fp32Masters(Block original) {
        this.original = original;
    }

    /**
     * Checks the initialized parameters once.
     *
     * @throws AmpException naming the first 16-bit parameter and the fix
     */
    void require(AmpBackend backend) {
        if (checked) {
            return;
        }
        for (Pair<String, Parameter> pair : original.getParameters()) {
            Parameter parameter = pair.getValue();
            if (!parameter.isInitialized()) {
                continue;
            }
            Precision precision = backend.precisionOf(parameter.getArray());
            if (precision == Precision.FP16 || precision == Precision.BF16) {
                throw refused("parameter '" + pair.getKey() + "' is " + precision.canonicalName());
            }
        }
        checked = true;
    }

    /** Checks again at the next forward: the parameters were replaced. */
    void forget() {
        checked = false;
    }

    /**
     * Refuses to initialize parameters in 16 bits.
     *
     * @throws AmpException for FLOAT16 and BFLOAT16
     */
    static void requireFp32Initialization(DataType dataType) {
        if (dataType == DataType.FLOAT16 || dataType == DataType.BFLOAT16) {
            throw refused("the model initializes its parameters as " + dataType);
        }
    }

    private static AmpException refused(String what) {
        return new AmpException(
                "djl-amp needs fp32 master weights, but "
                        + what
                        + ": it keeps the parameters in fp32 and casts them to 16 bits for each"
                        + " step itself, and 16-bit masters lose small updates. Remove"
                        + " model.setDataType(DataType.FLOAT16) (or BFLOAT16) and load or"
                        + " initialize the model in fp32; choose the compute precision with the"
                        + " policy instead, e.g. Amp.wrap(block, \"mixed_float16\").");
    }
}
