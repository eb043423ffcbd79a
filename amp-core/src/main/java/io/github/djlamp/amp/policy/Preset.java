package io.github.djlamp.amp.policy;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** The named policies a {@link PrecisionPolicy} starts from, with the names that select them. */
enum Preset {
    // the names a PyTorch user tries first (torch.float16, torch.bfloat16) select the mixed
    // policies
    MIXED_FLOAT16("mixed_float16", Precision.FP16, "fp16", "float16"),
    MIXED_BFLOAT16("mixed_bfloat16", Precision.BF16, "bf16", "bfloat16"),
    FLOAT32("float32", Precision.FP32, "fp32"),
    /** Compute precision decided later from the device: see {@link PrecisionPolicy#resolveAuto}. */
    AUTO("auto", null);

    private final String policyName;
    private final Precision computePrecision;
    private final List<String> aliases;

    Preset(String policyName, Precision computePrecision, String... aliases) {
        this.policyName = policyName;
        this.computePrecision = computePrecision;
        this.aliases = List.of(aliases);
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
            if (preset.policyName.equals(key) || preset.aliases.contains(key)) {
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
                    preset.aliases.isEmpty()
                            ? preset.policyName
                            : preset.policyName
                                    + " (alias"
                                    + (preset.aliases.size() == 1 ? " " : "es ")
                                    + String.join(", ", preset.aliases)
                                    + ")");
        }
        return String.join(", ", names);
    }
}
