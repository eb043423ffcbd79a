package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.ParameterStore;
import ai.djl.training.initializer.NormalInitializer;
import ai.djl.util.Pair;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The check of a block the engine's own autocast runs: on the real engine it passes where this
 * machine's 16-bit linear kernels pass their own check, and an engine whose autocast computes the
 * block 25% too large (a test double) is refused, with the value that failed named. The check
 * touches nothing of the caller's: the parameters' gradients stay as they were.
 */
class StageCheckTest {

    private static final Shape INPUT = new Shape(8, 16);

    @BeforeEach
    void forgetVerdicts() {
        KernelVerdicts.forgetAll();
    }

    @Test
    void aRightBlockUnderAutocastPassesAndAWrongOneIsRefused() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            Block block = mlp(manager);
            ParameterStore masters = new ParameterStore(manager, false);
            NDList inputs = new NDList(manager.randomNormal(INPUT));
            for (Precision precision : List.of(Precision.BF16, Precision.FP16)) {
                KernelVerdict right =
                        new KernelVerifier(backend)
                                .stageVerdict(block, "mlp", inputs, masters, true, precision, null);
                KernelVerdict linear =
                        Layers.check(
                                backend,
                                Linear.builder().setUnits(32).build(),
                                INPUT,
                                precision,
                                List.of(MemoryLayout.CONTIGUOUS),
                                manager);
                System.out.println(precision + ": " + right + "; the linear kernel: " + linear);
                if (linear.getOutcome() == KernelVerdict.Outcome.VERIFIED) {
                    assertEquals(
                            KernelVerdict.Outcome.VERIFIED, right.getOutcome(), right.toString());
                } else {
                    System.out.println(
                            precision
                                    + ": this machine's linear kernel failed its own check, so no"
                                    + " outcome of the block's is asserted");
                }

                KernelVerdicts.forgetAll();
                KernelVerdict wrong =
                        new KernelVerifier(WrongUnderAutocast.outputsTooLarge(backend))
                                .stageVerdict(block, "mlp", inputs, masters, true, precision, null);
                assertEquals(
                        KernelVerdict.Outcome.FP32_FALLBACK, wrong.getOutcome(), wrong.toString());
                assertTrue(!wrong.runsLowPrecision(), wrong.toString());
                assertTrue(
                        wrong.getFindings().get(0).startsWith("output 0 is 0.25"),
                        wrong.getFindings().toString());
                KernelVerdicts.forgetAll();
            }
            for (Pair<String, Parameter> pair : block.getParameters()) {
                NDArray gradient = pair.getValue().getArray().getGradient();
                assertEquals(
                        0f,
                        gradient.abs().sum().toType(DataType.FLOAT32, false).getFloat(),
                        pair.getKey() + ": the check added into a parameter's gradient");
            }
        }
    }

    /**
     * An output that no parameter reaches (DeepAR's scale, computed from the data alone) is
     * compared by value and not back-propagated: before, autograd refused the backward ("element 2
     * of tensors does not require grad") and the block ran unverified (seen in DJL's
     * TrainTimeSeries).
     */
    @Test
    void anOutputNoParameterReachesIsComparedByValueOnly() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            Block mlp = mlp(manager);
            Block withScale =
                    new ParallelBlock(
                            outputs -> new NDList(outputs.get(0).head(), outputs.get(1).head()),
                            List.of(mlp, new LambdaBlock(x -> new NDList(x.head().abs()))));
            NDList inputs = new NDList(manager.randomNormal(INPUT));
            KernelVerdict verdict =
                    new KernelVerifier(backend)
                            .stageVerdict(
                                    withScale,
                                    "with scale",
                                    inputs,
                                    new ParameterStore(manager, false),
                                    true,
                                    Precision.BF16,
                                    null);
            assertNotEquals(
                    KernelVerdict.Outcome.NOT_CHECKED, verdict.getOutcome(), verdict.toString());
        }
    }

    /**
     * In fp16 a weight gradient that overflows at the check's cotangent of 1 while the forward pass
     * fits (activations scaled up 3000 times between two linear layers, summed over a batch of
     * 4096) is fp16's range, which loss scaling handles in training: the check backs off as the
     * scaler does and judges the kernels. Where the forward pass itself overflows (inputs of 20000,
     * as DJL's TrainAirfoilWithTabNet's unnormalized frequencies), no cotangent helps: fp32, and
     * the finding says it is fp16's range.
     */
    @Test
    void fp16sRangeIsTheScalersAndTheForwardsNotTheKernels() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            Engine.getInstance().setRandomSeed(5);
            Block scaledUp =
                    new SequentialBlock()
                            .add(Linear.builder().setUnits(32).build())
                            .add(x -> new NDList(x.head().mul(3000f)))
                            .add(Linear.builder().setUnits(4).build());
            scaledUp.setInitializer(new NormalInitializer(0.3f), Parameter.Type.WEIGHT);
            scaledUp.initialize(manager, DataType.FLOAT32, new Shape(4096, 16));
            KernelVerdict backedOff =
                    verdict(backend, scaledUp, manager.randomNormal(new Shape(4096, 16)), manager);
            KernelVerdict linear =
                    Layers.check(
                            backend,
                            Linear.builder().setUnits(32).build(),
                            INPUT,
                            Precision.FP16,
                            List.of(MemoryLayout.CONTIGUOUS),
                            manager);
            if (linear.getOutcome() == KernelVerdict.Outcome.VERIFIED) {
                assertEquals(
                        KernelVerdict.Outcome.VERIFIED,
                        backedOff.getOutcome(),
                        backedOff.toString());
            } else {
                System.out.println("fp16: this machine's linear kernel failed its own check");
            }

            KernelVerdict forward =
                    verdict(
                            backend,
                            mlp(manager),
                            manager.randomNormal(new Shape(256, 16)).mul(20000f),
                            manager);
            assertEquals(KernelVerdict.Outcome.FP32_FALLBACK, forward.getOutcome());
            assertTrue(
                    forward.getFindings().get(0).startsWith("fp16's gradients are not finite"),
                    forward.getFindings().toString());
        }
    }

    private static KernelVerdict verdict(
            AmpBackend backend, Block block, NDArray input, NDManager manager) {
        return new KernelVerifier(backend)
                .stageVerdict(
                        block,
                        "fp16 range",
                        new NDList(input),
                        new ParameterStore(manager, false),
                        true,
                        Precision.FP16,
                        null);
    }

    /**
     * A block that hands an input on as an output (d2l-java's decoders return the valid lengths
     * they were given): the check's first run took that array for its own and freed it, and the
     * second run met it released ("Native resource has been released already").
     */
    @Test
    void anInputHandedOnAsAnOutputStaysTheCallers() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            Block mlp = mlp(manager);
            Block handsOn =
                    new ParallelBlock(
                            outputs -> new NDList(outputs.get(0).head(), outputs.get(1).head()),
                            List.of(
                                    new SequentialBlock()
                                            .add(new LambdaBlock(x -> new NDList(x.head())))
                                            .add(mlp),
                                    new LambdaBlock(x -> new NDList(x.get(1)))));
            NDArray lengths = manager.create(new int[] {3, 4, 5, 6, 7, 8, 1, 2});
            NDList inputs = new NDList(manager.randomNormal(INPUT), lengths);
            KernelVerdict verdict =
                    new KernelVerifier(backend)
                            .stageVerdict(
                                    handsOn,
                                    "hands on",
                                    inputs,
                                    new ParameterStore(manager, false),
                                    true,
                                    Precision.BF16,
                                    null);
            assertNotEquals(
                    KernelVerdict.Outcome.NOT_CHECKED, verdict.getOutcome(), verdict.toString());
            assertEquals(8, lengths.toIntArray().length, "the caller's array is still there");
        }
    }

    static Block mlp(NDManager manager) {
        Engine.getInstance().setRandomSeed(5);
        Block block =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(32).build())
                        .add(Activation::relu)
                        .add(Linear.builder().setUnits(4).build());
        block.setInitializer(new NormalInitializer(0.3f), Parameter.Type.WEIGHT);
        block.initialize(manager, DataType.FLOAT32, INPUT);
        for (Pair<String, Parameter> pair : block.getParameters()) {
            pair.getValue().getArray().setRequiresGradient(true);
        }
        return block;
    }
}
