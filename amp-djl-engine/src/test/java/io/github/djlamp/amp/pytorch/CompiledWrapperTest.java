package io.github.djlamp.amp.pytorch;

import static io.github.djlamp.amp.pytorch.CompiledSteps.compiledStep;
import static io.github.djlamp.amp.pytorch.CompiledSteps.initialize;
import static io.github.djlamp.amp.pytorch.CompiledSteps.parameters;
import static io.github.djlamp.amp.pytorch.CompiledSteps.runs;
import static io.github.djlamp.amp.pytorch.CompiledSteps.step;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.basic.Mlp;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.verify.KernelVerification;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The wrapper with its compiled forward turned on, against the unwrapped block run by DJL. */
class CompiledWrapperTest {

    @Test
    void fp32ResNetThroughTheWrapperIsBitwiseDjl() {
        Block resNet =
                ResNetV1.builder()
                        .setImageShape(new Shape(1, 32, 32))
                        .setNumLayers(18)
                        .setOutSize(10)
                        .build();
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            NDArray x = initialize(resNet, manager, new Shape(2, 1, 32, 32));
            List<NDArray> stats = new ArrayList<>();
            List<NDArray> before = new ArrayList<>();
            for (Parameter p : parameters(resNet)) {
                if (!p.requiresGradient()) {
                    stats.add(p.getArray());
                    before.add(p.getArray().duplicate());
                }
            }
            List<float[]> eager = step(resNet, x);
            for (int i = 0; i < stats.size(); i++) {
                before.get(i).copyTo(stats.get(i));
            }
            MixedPrecisionBlock wrapped = Amp.wrap(resNet, "float32").compileForward(true);
            List<float[]> compiled = compiledStep(wrapped, x);
            assertTrue(wrapped.isForwardCompiled(x.getDevice()));
            assertEquals(eager.size(), compiled.size());
            for (int i = 0; i < eager.size(); i++) {
                assertArrayEquals(eager.get(i), compiled.get(i), 0f, "array " + i);
            }
        }
    }

    @Test
    void bf16MlpGradientsAreNearFp32() {
        Block mlp = new Mlp(12, 5, new int[] {16, 8});
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            NDArray x = initialize(mlp, manager, new Shape(4, 12));
            List<float[]> fp32 = step(mlp, x);
            MixedPrecisionBlock wrapped =
                    Amp.wrap(mlp, "mixed_bfloat16", KernelVerification.OFF).compileForward(true);
            List<float[]> bf16 = compiledStep(wrapped, x);
            assertTrue(wrapped.isForwardCompiled(x.getDevice()));
            // the output first, then each gradient
            for (int i = 1; i < fp32.size(); i++) {
                float scale = 0;
                for (float v : fp32.get(i)) {
                    scale = Math.max(scale, Math.abs(v));
                }
                for (int j = 0; j < fp32.get(i).length; j++) {
                    assertEquals(fp32.get(i)[j], bf16.get(i)[j], 0.03f * scale, i + ":" + j);
                }
            }
        }
    }

    @Test
    void bf16ResNetIsTheEagerBf16Wrapper() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block eagerNet = resNet();
            NDArray x = initialize(eagerNet, manager, new Shape(2, 1, 32, 32));
            List<float[]> eager =
                    step(Amp.wrap(eagerNet, "mixed_bfloat16", KernelVerification.OFF), x);
            Block compiledNet = resNet();
            initialize(compiledNet, manager, new Shape(2, 1, 32, 32));
            MixedPrecisionBlock wrapped =
                    Amp.wrap(compiledNet, "mixed_bfloat16", KernelVerification.OFF)
                            .compileForward(true);
            List<float[]> compiled = compiledStep(wrapped, x);
            assertTrue(wrapped.isForwardCompiled(x.getDevice()));
            // the same casts (channels-last bf16 convolution inputs and weights, fp32 BatchNorm
            // parameters on bf16 input) and the same kernels as djl-amp's eager bf16 path
            for (int i = 0; i < eager.size(); i++) {
                assertArrayEquals(eager.get(i), compiled.get(i), 0f, "array " + i);
            }
        }
    }

    private static Block resNet() {
        return ResNetV1.builder()
                .setImageShape(new Shape(1, 32, 32))
                .setNumLayers(18)
                .setOutSize(10)
                .build();
    }

    @Test
    void withKernelChecksTheFirstForwardRunsEagerlyAndChecks() {
        Block mlp = new Mlp(12, 5, new int[] {16, 8});
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            NDArray x = initialize(mlp, manager, new Shape(4, 12));
            MixedPrecisionBlock wrapped = Amp.wrap(mlp, "mixed_bfloat16").compileForward(true);
            step(wrapped, x);
            assertFalse(wrapped.isForwardCompiled(x.getDevice()));
            assertFalse(wrapped.getKernelVerdicts().isEmpty());
            step(wrapped, x);
            assertTrue(wrapped.isForwardCompiled(x.getDevice()));
        }
    }

    @Test
    void aBlockItCannotCompileRunsEagerlyBetweenCompiledRunsAndIsNamed() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block plain = withElu();
            NDArray x = initialize(plain, manager, new Shape(2, 3));
            List<float[]> eager = step(plain, x);
            Block block = withElu();
            initialize(block, manager, new Shape(2, 3));
            MixedPrecisionBlock wrapped = Amp.wrap(block, "float32").compileForward(true);
            List<float[]> compiled = compiledStep(wrapped, x);
            assertEquals(
                    List.of("01Linear .. 02LambdaBlock", "04Linear .. 05LambdaBlock"),
                    runs(wrapped, x));
            String refusal = wrapped.compiledForwardRefusal(x.getDevice());
            assertNotNull(refusal);
            assertFalse(wrapped.isForwardCompiled(x.getDevice()));
            assertTrue(refusal.startsWith("03LambdaBlock: DJL's ELU"), refusal);
            for (int i = 0; i < eager.size(); i++) {
                assertArrayEquals(eager.get(i), compiled.get(i), 0f, "array " + i);
            }
        }
    }

    @Test
    void aRunAfterAnEagerBlockTakesItsBf16OutputAsTheEagerStagesDo() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block eagerBlock = withElu();
            NDArray x = initialize(eagerBlock, manager, new Shape(2, 3));
            List<float[]> eager =
                    step(Amp.wrap(eagerBlock, "mixed_bfloat16", KernelVerification.OFF), x);
            Block block = withElu();
            initialize(block, manager, new Shape(2, 3));
            MixedPrecisionBlock wrapped =
                    Amp.wrap(block, "mixed_bfloat16", KernelVerification.OFF).compileForward(true);
            List<float[]> compiled = compiledStep(wrapped, x);
            // the second run's input is the bf16 output of the eager ELU
            assertEquals(2, runs(wrapped, x).size());
            for (int i = 0; i < eager.size(); i++) {
                assertArrayEquals(eager.get(i), compiled.get(i), 0f, "array " + i);
            }
        }
    }

    @Test
    void aLayerThePolicyKeepsInFp32IsFp32InTheCompiledRun() {
        String policy = "mixed_bfloat16[path:02ParallelBlock/01SequentialBlock/04Conv2d=fp32]";
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block eagerNet = resNet();
            NDArray x = initialize(eagerNet, manager, new Shape(2, 1, 32, 32));
            List<float[]> eager = step(Amp.wrap(eagerNet, policy, KernelVerification.OFF), x);
            Block compiledNet = resNet();
            initialize(compiledNet, manager, new Shape(2, 1, 32, 32));
            MixedPrecisionBlock wrapped =
                    Amp.wrap(compiledNet, policy, KernelVerification.OFF).compileForward(true);
            List<float[]> compiled = compiledStep(wrapped, x);
            assertTrue(wrapped.isForwardCompiled(x.getDevice()));
            // the first convolution's weight gradient: fp32 in both, so any bf16 rounding of it
            // in the compiled run shows
            for (int i = 0; i < eager.size(); i++) {
                assertArrayEquals(eager.get(i), compiled.get(i), 0f, "array " + i);
            }
        }
    }

    @Test
    void anInferenceForwardInsideAGradientCollectorRecordsAsTheEagerOneDoes() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block plain = resNet();
            NDArray x = initialize(plain, manager, new Shape(2, 1, 32, 32));
            float[] eager = inputGradientInInference(plain, x);
            Block block = resNet();
            initialize(block, manager, new Shape(2, 1, 32, 32));
            MixedPrecisionBlock wrapped = Amp.wrap(block, "float32");
            inputGradientInInference(wrapped, x);
            // a saliency map: the input's gradient of an inference forward, compiled
            float[] compiled = inputGradientInInference(wrapped, x);
            assertTrue(wrapped.isForwardCompiled(x.getDevice()));
            assertArrayEquals(eager, compiled, 0f);
        }
    }

    private static float[] inputGradientInInference(Block block, NDArray x) {
        try (NDManager step = x.getManager().newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            NDArray input = x.duplicate();
            input.attach(step);
            input.setRequiresGradient(true);
            NDArray out =
                    block.forward(new ParameterStore(step, false), new NDList(input), false)
                            .singletonOrThrow();
            collector.backward(out.sum());
            return input.getGradient().toFloatArray();
        }
    }

    private static Block withElu() {
        SequentialBlock block = new SequentialBlock();
        block.add(Linear.builder().setUnits(4).build())
                .add(Activation::relu)
                .add(Activation.eluBlock(1f)) // no compiled form
                .add(Linear.builder().setUnits(3).build())
                .add(Activation::relu);
        return block;
    }
}
