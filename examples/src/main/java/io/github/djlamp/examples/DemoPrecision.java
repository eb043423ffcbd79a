package io.github.djlamp.examples;

import java.util.List;

/** What the demo's {@code --precision} asks for: one run, or the fp32-against-AMP comparison. */
public enum DemoPrecision {
    /** fp32 through plain DJL. */
    FP32("fp32", List.of("float32")),
    /** fp16 compute with dynamic loss scaling (for Volta/Turing GPUs; very slow on CPUs). */
    FP16("fp16", List.of("mixed_float16")),
    /** bf16 compute, no loss scaling. */
    BF16("bf16", List.of("mixed_bfloat16")),
    /** What the hardware recommends: bf16 on CPUs with AVX512-BF16 or AMX and on Ampere+. */
    AUTO("auto", List.of("auto")),
    /** fp32 through plain DJL, then {@code auto}: the comparison. */
    COMPARE("compare", List.of("float32", "auto"));

    private final String cliName;
    private final List<String> policies;

    DemoPrecision(String cliName, List<String> policies) {
        this.cliName = cliName;
        this.policies = policies;
    }

    /**
     * Returns the name used on the command line.
     *
     * @return e.g. {@code compare}
     */
    public String cliName() {
        return cliName;
    }

    /**
     * Returns the djl-amp precision policies to run, in order.
     *
     * @return policy names
     */
    public List<String> policies() {
        return policies;
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return cliName;
    }
}
