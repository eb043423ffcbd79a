package io.github.djlamp.amp.policy;

import ai.djl.ndarray.types.DataType;
import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * A floating-point precision that djl-amp computes in.
 *
 * <p>DJL's own {@link DataType} cannot be used for bfloat16 with the PyTorch engine (passing {@code
 * DataType.BFLOAT16} to native code terminates the JVM), so djl-amp names precisions itself and
 * never hands {@link #BF16} to DJL.
 */
public enum Precision {
    /** IEEE single precision: 8 exponent bits, 23 mantissa bits. */
    FP32("float32", 32, 8, 23),
    /** IEEE half precision: range [2^-24, 65504]; needs loss scaling for training. */
    FP16("float16", 16, 5, 10),
    /** bfloat16: fp32's range with 7 mantissa bits; needs no loss scaling. */
    BF16("bfloat16", 16, 8, 7);

    private final String canonicalName;
    private final int bits;
    private final int exponentBits;
    private final int mantissaBits;

    Precision(String canonicalName, int bits, int exponentBits, int mantissaBits) {
        this.canonicalName = canonicalName;
        this.bits = bits;
        this.exponentBits = exponentBits;
        this.mantissaBits = mantissaBits;
    }

    /**
     * Returns the long name, as Keras and PyTorch spell it ({@code float32}, {@code float16},
     * {@code bfloat16}).
     *
     * @return the canonical name
     */
    public String canonicalName() {
        return canonicalName;
    }

    /**
     * Returns the storage width.
     *
     * @return bits per element
     */
    public int bits() {
        return bits;
    }

    /**
     * Returns the number of exponent bits.
     *
     * @return exponent bits
     */
    public int exponentBits() {
        return exponentBits;
    }

    /**
     * Returns the number of explicit mantissa bits.
     *
     * @return mantissa bits
     */
    public int mantissaBits() {
        return mantissaBits;
    }

    /**
     * Returns whether this is a 16-bit precision.
     *
     * @return true for FP16 and BF16
     */
    public boolean isReduced() {
        return this != FP32;
    }

    /**
     * Returns whether training in this precision needs loss scaling to keep small gradients from
     * underflowing.
     *
     * @return true for FP16 only
     */
    public boolean needsLossScaling() {
        return this == FP16;
    }

    /**
     * Returns the DJL data type, where DJL's PyTorch engine can safely express it.
     *
     * @return the DJL data type
     * @throws UnsupportedOperationException for BF16, which DJL's PyTorch engine cannot express
     */
    public DataType toDataType() {
        return switch (this) {
            case FP32 -> DataType.FLOAT32;
            case FP16 -> DataType.FLOAT16;
            case BF16 ->
                    throw new UnsupportedOperationException(
                            "bfloat16 has no safe DJL DataType (DataType.BFLOAT16 terminates the"
                                    + " JVM in DJL's PyTorch engine); use AmpBackend.cast to make"
                                    + " bf16 arrays");
        };
    }

    /**
     * Returns the precision of a DJL data type.
     *
     * @param dataType a DJL data type
     * @return the precision, or null when the type is not one of FLOAT32, FLOAT16, BFLOAT16
     */
    public static Precision fromDataType(DataType dataType) {
        switch (dataType) {
            case FLOAT32:
                return FP32;
            case FLOAT16:
                return FP16;
            case BFLOAT16:
                return BF16;
            default:
                return null;
        }
    }

    /**
     * Parses a precision name: {@code fp32}, {@code float32}, {@code fp16}, {@code float16}, {@code
     * half}, {@code bf16} or {@code bfloat16}, in any case.
     *
     * @param name the name
     * @return the precision
     * @throws IllegalArgumentException naming the accepted names when {@code name} is not one
     */
    public static Precision fromName(String name) {
        if (name != null) {
            switch (name.trim().toLowerCase(Locale.ROOT)) {
                case "fp32":
                case "float32":
                case "float":
                    return FP32;
                case "fp16":
                case "float16":
                case "half":
                    return FP16;
                case "bf16":
                case "bfloat16":
                    return BF16;
                default:
                    break;
            }
        }
        String valid =
                Arrays.stream(values())
                        .map(p -> p.shortName() + " (" + p.canonicalName + ")")
                        .collect(Collectors.joining(", "));
        throw new IllegalArgumentException(
                "Unknown precision '" + name + "'; valid precisions are " + valid);
    }

    /**
     * Returns the short name: {@code fp32}, {@code fp16} or {@code bf16}.
     *
     * @return the short name
     */
    public String shortName() {
        return name().toLowerCase(Locale.ROOT);
    }
}
