package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * DJL's model-zoo ResNetV1, SqueezeNet (known ParallelBlock joins) and Mlp, user joins that call
 * softmax or build arrays of their input's data type, its transformer blocks, an LSTM and a user
 * lambda that calls softmax train and infer through djl-amp in bf16, and in fp16 on tiny shapes,
 * without killing the JVM: each runs in a child JVM, so a native crash fails its test instead of
 * the build.
 */
class ModelZooNoCrashTest {

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
        "softmax-join, mixed_bfloat16, 2",
        "softmax-join, mixed_float16, 2",
        "ones-join, mixed_bfloat16, 2",
        "ones-join, mixed_float16, 2",
        "squeezenet, mixed_bfloat16, 1",
    })
    void trainsAndInfersWithoutCrashing(String model, String policy, int steps) throws Exception {
        ForkedJvm.Result result = ForkedJvm.run(ZooScenarios.class, model, policy, "" + steps);
        System.out.println(result.output.strip());
        assertEquals(0, result.exitCode, "child JVM exit code; output:\n" + result.output);
        assertEquals("OK", result.lastLine(), "last line; output:\n" + result.output);
    }

    @Test
    void harnessNoticesANativeCrash() throws Exception {
        ForkedJvm.Result result = ForkedJvm.run(ZooScenarios.class, "crash");
        assertNotEquals(0, result.exitCode, "DJL's bf16 enum kills the JVM:\n" + result.output);
        assertNotEquals("OK", result.lastLine());
    }
}
