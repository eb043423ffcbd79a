package io.github.djlamp.amp.policy;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** The named policies a {@link PrecisionPolicy} starts from, with the names that select them. */
enum Preset {
    MIXED_FLOAT16("mixed_float16", Precision.FP16, "fp16"),
    MIXED_BFLOAT16("mixed_bfloat16", Precision.BF16, "bf16"),
    FLOAT32("float32", Precision.FP32, "fp32"),
    /** Compute precision decided later from the device: see {@link PrecisionPolicy#resolveAuto}. */
    AUTO("auto", null, null);

    private final String policyName;
    private final Precision computePrecision;
    private final String alias;

    Preset(String policyName, Precision computePrecision, String alias) {
        this.policyName = policyName;
        this.computePrecision = computePrecision;
        this.alias = alias;
    }

    String policyName() {
        return policyName;
    }

    /** Returns the compute precision, or null for {@link #AUTO}. */
    Precision computePrecision() {
        return computePrecision;
    }

    /** Returns the concrete preset that computes in {@code precision}. */
    static Preset forPrecision(Precision precision) {
        for (Preset preset : values()) {
            if (preset.computePrecision == precision) {
                return preset;
            }
        }
        throw new IllegalArgumentException("No preset computes in " + precision);
    }

    /**
     * Parses a policy name or alias, in any case.
     *
     * @throws IllegalArgumentException listing the valid names
     */
    static Preset named(String name) {
        String key = name == null ? "" : name.trim().toLowerCase(Locale.ROOT);
        for (Preset preset : values()) {
            if (preset.policyName.equals(key) || key.equals(preset.alias)) {
                return preset;
            }
        }
        throw new IllegalArgumentException(
                "Unknown precision policy '" + name + "'; valid names are " + validNames());
    }

    /** Returns the valid names with their aliases, for messages. */
    static String validNames() {
        List<String> names = new ArrayList<>();
        for (Preset preset : values()) {
            names.add(
                    preset.alias == null
                            ? preset.policyName
                            : preset.policyName + " (alias " + preset.alias + ")");
        }
        return String.join(", ", names);
    }
}
