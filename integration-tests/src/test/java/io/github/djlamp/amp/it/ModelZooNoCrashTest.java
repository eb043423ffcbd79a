package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * DJL's model-zoo ResNetV1, SqueezeNet (known ParallelBlock joins) and Mlp, user joins that call
 * softmax or build arrays of their input's data type, its transformer blocks, an LSTM and a user
 * lambda that calls softmax (unnamed, or named "ReLU" as DJL names its relu) train and infer
 * through djl-amp in bf16, and in fp16 on tiny shapes, without killing the JVM: each runs in a
 * child JVM, so a native crash fails its test instead of the build.
 */
class ModelZooNoCrashTest {

    private static final Map<String, ForkedJvm.Result> PLAIN_DJL = new ConcurrentHashMap<>();

    @ParameterizedTest(name = "{0} under {1}")
    @CsvSource({
        "resnet20, mixed_bfloat16, 3",
        "resnet18, mixed_bfloat16, 2",
        "resnet50, mixed_bfloat16, 1",
        "resnet20, mixed_float16, 2",
        "mlp, mixed_bfloat16, 3",
        "mlp, mixed_float16, 3",
        "mlp, 'mixed_bfloat16[class:ai.djl.basicmodelzoo.basic.Mlp=low]', 3",
        "mlp, 'mixed_float16[class:ai.djl.basicmodelzoo.basic.Mlp=low]', 3",
        "transformer, mixed_bfloat16, 3",
        "transformer, mixed_float16, 3",
        "transformer, 'mixed_float16[class:ai.djl.nn.transformer.TransformerEncoderBlock=low]', 2",
        "bert, mixed_bfloat16, 2",
        "bert, mixed_float16, 2",
        "lstm, mixed_bfloat16, 2",
        "lstm, mixed_float16, 2",
        "softmax-lambda, mixed_bfloat16, 2",
        "softmax-lambda, mixed_float16, 2",
        "softmax-lambda, auto, 2",
        "named-softmax-lambda, mixed_bfloat16, 2",
        "softmax-join, mixed_bfloat16, 2",
        "softmax-join, mixed_float16, 2",
        "ones-join, mixed_bfloat16, 2",
        "ones-join, mixed_float16, 2",
        "squeezenet, mixed_bfloat16, 1",
    })
    void trainsAndInfersWithoutCrashing(String model, String policy, int steps) throws Exception {
        requirePlainDjlSurvives(model, steps);
        ForkedJvm.Result result = ForkedJvm.run(ZooScenarios.class, model, policy, "" + steps);
        System.out.println(result.output.strip());
        assertEquals(0, result.exitCode, "child JVM exit code; output:\n" + result.output);
        assertEquals("OK", result.lastLine(), "last line; output:\n" + result.output);
    }

    /**
     * Runs the same model with plain DJL in fp32 (no djl-amp) in a child JVM first, once per model:
     * where plain DJL itself dies (oneDNN's kernels crash on some machines, see PlatformCheck), the
     * platform is defective, and djl-amp's case is reported as not judged, with the reason, instead
     * of failing for what is not djl-amp's.
     */
    private static void requirePlainDjlSurvives(String model, int steps) throws Exception {
        ForkedJvm.Result plain =
                PLAIN_DJL.computeIfAbsent(
                        model,
                        m -> {
                            try {
                                return ForkedJvm.run(
                                        ZooScenarios.class, m, ZooScenarios.PLAIN_DJL, "" + steps);
                            } catch (Exception e) {
                                throw new IllegalStateException(e);
                            }
                        });
        if (plain.exitCode == 0 && "OK".equals(plain.lastLine())) {
            return;
        }
        String reason =
                "ENVIRONMENT DEFECT: plain DJL fp32 without djl-amp dies on "
                        + model
                        + " on this machine ("
                        + describeDeath(plain)
                        + "): the platform's kernels are broken (oneDNN on some hypervisors;"
                        + " the cure is ONEDNN_MAX_CPU_ISA=AVX2, checked by"
                        + " io.github.djlamp.amp.doctor.PlatformCheck), so djl-amp's case on this"
                        + " model cannot be judged here";
        System.out.println(reason);
        Assumptions.abort(reason);
    }

    /**
     * How a child ended: its signal, the JVM's problematic frame if it wrote one, or its last line.
     */
    static String describeDeath(ForkedJvm.Result result) {
        String[] signals = {
            "", "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE",
            "SIGKILL", "SIGUSR1", "SIGSEGV"
        };
        int code = result.exitCode;
        String signal = code > 128 && code - 128 < signals.length ? signals[code - 128] + ", " : "";
        String[] lines = result.output.strip().split("\\R");
        for (int i = 0; i + 1 < lines.length; i++) {
            if (lines[i].contains("Problematic frame")) {
                return signal
                        + "exit code "
                        + code
                        + ", in "
                        + lines[i + 1].replaceFirst("^#", "").strip();
            }
        }
        return signal + "exit code " + code + ", last line: " + result.lastLine();
    }

    @Test
    void plainDjlRunsInTheChildAsTheGuardAssumes() throws Exception {
        ForkedJvm.Result result =
                ForkedJvm.run(ZooScenarios.class, "mlp", ZooScenarios.PLAIN_DJL, "2");
        System.out.println(result.output.strip());
        assertEquals(0, result.exitCode, result.output);
        assertTrue(result.output.contains("plain DJL fp32 steps"), result.output);
    }

    @Test
    void harnessNoticesANativeCrash() throws Exception {
        ForkedJvm.Result result = ForkedJvm.run(ZooScenarios.class, "crash");
        assertNotEquals(0, result.exitCode, "DJL's bf16 enum kills the JVM:\n" + result.output);
        assertNotEquals("OK", result.lastLine());
        assertTrue(
                describeDeath(result).startsWith("SIGABRT, exit code 134, last line: terminate"),
                "the guard names how the child died: " + describeDeath(result));
    }
}
