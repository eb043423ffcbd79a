package io.github.djlamp.amp.pytorch;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The instruction-set cap oneDNN (libtorch's CPU kernels) runs under: {@code ONEDNN_MAX_CPU_ISA}
 * (or its old name {@code DNNL_MAX_CPU_ISA}) from the environment the JVM started with, or the
 * value djl-amp set in this process ({@link OneDnnCure}), which Java's view of the environment does
 * not show. oneDNN reads it once, when it creates its first primitive.
 */
final class OneDnnIsa {

    static final String VARIABLE = "ONEDNN_MAX_CPU_ISA";
    static final String OLD_VARIABLE = "DNNL_MAX_CPU_ISA";
    static final String ATEN_VARIABLE = "ATEN_CPU_CAPABILITY";

    /**
     * The caps under which oneDNN has native bf16 arithmetic (AVX512_CORE_BF16 and above, AMX); ALL
     * and DEFAULT are no cap. Every other known cap (SSE41 to AVX512_CORE_VNNI, AVX2_VNNI_2) makes
     * oneDNN emulate bf16, slower than fp32.
     */
    private static final List<String> NATIVE_BF16 =
            Arrays.asList(
                    "ALL",
                    "DEFAULT",
                    "AVX512_CORE_BF16",
                    "AVX512_CORE_FP16",
                    "AVX512_CORE_AMX",
                    "AVX512_CORE_AMX_FP16",
                    "AVX10_1_512",
                    "AVX10_1_512_AMX",
                    "AVX10_1_512_AMX_FP16",
                    "AVX10_2_512",
                    "AVX10_2_512_AMX_2");

    private static final List<String> EMULATED_BF16 =
            Arrays.asList(
                    "SSE41",
                    "AVX",
                    "AVX2",
                    "AVX2_VNNI",
                    "AVX2_VNNI_2",
                    "AVX512_CORE",
                    "AVX512_CORE_VNNI");

    private static volatile String setInProcess;

    private OneDnnIsa() {}

    /** The cap in force, or null when none is set. */
    static String capInForce() {
        String set = setInProcess;
        if (set != null) {
            return set;
        }
        String value = System.getenv(VARIABLE);
        if (value == null || value.isBlank()) {
            value = System.getenv(OLD_VARIABLE);
        }
        return value == null || value.isBlank() ? null : value.trim();
    }

    /** Records a cap djl-amp set in this process's environment with {@code setenv}. */
    static void setInProcess(String cap) {
        setInProcess = cap;
    }

    /**
     * Returns whether oneDNN computes bf16 natively under {@code cap}: no cap, or one at or above
     * AVX512_CORE_BF16. An unknown value is one oneDNN ignores, so it caps nothing.
     */
    static boolean allowsNativeBf16(String cap) {
        if (cap == null) {
            return true;
        }
        String name = cap.trim().toUpperCase(Locale.ROOT);
        return NATIVE_BF16.contains(name) || !EMULATED_BF16.contains(name);
    }

    /** The caps in force, for the key of kept verdicts: oneDNN's and ATen's. */
    static String describe() {
        String aten = System.getenv(ATEN_VARIABLE);
        return VARIABLE
                + "="
                + (capInForce() == null ? "(unset)" : capInForce())
                + ", "
                + ATEN_VARIABLE
                + "="
                + (aten == null || aten.isBlank() ? "(unset)" : aten.trim());
    }
}
