package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.verify.KernelVerification;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/** One training step of a block, eager or through the wrapper's compiled forward (tests). */
final class CompiledSteps {

    /** The seed of each step's random draws (dropout), so that two steps draw alike. */
    private static final int STEP_SEED = 17;

    private CompiledSteps() {}

    static NDArray initialize(Block block, NDManager manager, Shape inputShape) {
        Engine.getInstance().setRandomSeed(5);
        block.initialize(manager, DataType.FLOAT32, inputShape);
        return manager.randomNormal(inputShape);
    }

    /** One training forward and backward: the output, then every gradient and running stat. */
    static List<float[]> step(Block block, NDArray x) {
        try (NDManager step = x.getManager().newSubManager();
                GradientCollector collector = Engine.getInstance().newGradientCollector()) {
            collector.zeroGradients();
            Engine.getInstance().setRandomSeed(STEP_SEED);
            NDArray out =
                    block.forward(new ParameterStore(step, false), new NDList(x), true)
                            .singletonOrThrow();
            NDArray weights = out.getManager().arange((float) out.size()).reshape(out.getShape());
            collector.backward(out.mul(out).mul(weights.add(1f)).sum());
            List<float[]> result = new ArrayList<>();
            result.add(out.toFloatArray());
            for (Parameter p : parameters(block)) {
                result.add(
                        p.requiresGradient()
                                ? p.getArray().getGradient().toFloatArray()
                                : p.getArray().toFloatArray());
            }
            return result;
        }
    }

    /**
     * The step after the first: the first forward of an input shape runs eagerly. The running
     * statistics the first step moved are put back, so that the compiled step starts where a single
     * eager step does.
     */
    static List<float[]> compiledStep(MixedPrecisionBlock wrapped, NDArray x) {
        List<NDArray> stats = new ArrayList<>();
        List<NDArray> before = new ArrayList<>();
        for (Parameter p : parameters(wrapped)) {
            if (!p.requiresGradient()) {
                stats.add(p.getArray());
                before.add(p.getArray().duplicate());
            }
        }
        step(wrapped, x);
        assertTrue(runs(wrapped, x).isEmpty(), "the first forward runs eagerly");
        for (int i = 0; i < stats.size(); i++) {
            before.get(i).copyTo(stats.get(i));
        }
        List<float[]> compiled = step(wrapped, x);
        assertFalse(runs(wrapped, x).isEmpty(), "the second forward runs compiled");
        return compiled;
    }

    /** A wrapper whose compiled step matched the eager one, and the device it ran on. */
    record Compiled(MixedPrecisionBlock wrapped, Device device) {

        /** One compiled run covers the whole tree. */
        void assertWhole() {
            assertTrue(
                    wrapped.isForwardCompiled(device),
                    () -> wrapped.compiledForwardRefusal(device));
        }

        /** So many runs ran compiled. */
        void assertRuns(int runs) {
            assertEquals(
                    runs,
                    wrapped.compiledRuns(device).size(),
                    () -> wrapped.compiledForwardRefusal(device));
        }
    }

    /**
     * Asserts that {@code network}'s compiled step (outputs, every gradient and running statistic)
     * is bitwise its eager step: plain DJL's under "float32", djl-amp's eager wrapper's under a
     * 16-bit policy.
     *
     * @param inputScale what the standard normal input is multiplied by
     * @return the compiled wrapper, for what the caller asserts of its runs
     */
    static Compiled assertCompiledAsEager(
            Supplier<Block> network,
            Shape inputShape,
            float inputScale,
            String policy,
            KernelVerification checks) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block eagerBlock = network.get();
            NDArray x = initialize(eagerBlock, manager, inputShape).mul(inputScale);
            List<float[]> eager =
                    step(
                            policy.equals("float32")
                                    ? eagerBlock
                                    : Amp.wrap(eagerBlock, policy, checks),
                            x);
            Block block = network.get();
            initialize(block, manager, inputShape);
            MixedPrecisionBlock wrapped = Amp.wrap(block, policy, checks).compileForward(true);
            assertSameArrays(eager, compiledStep(wrapped, x));
            return new Compiled(wrapped, x.getDevice());
        }
    }

    /** Asserts two steps' arrays bitwise equal, in order. */
    static void assertSameArrays(List<float[]> eager, List<float[]> compiled) {
        assertEquals(eager.size(), compiled.size());
        for (int i = 0; i < eager.size(); i++) {
            assertArrayEquals(eager.get(i), compiled.get(i), 0f, "array " + i);
        }
    }

    static List<String> runs(MixedPrecisionBlock wrapped, NDArray x) {
        return wrapped.compiledRuns(x.getDevice());
    }

    static List<Parameter> parameters(Block block) {
        List<Parameter> all = new ArrayList<>();
        block.getParameters().forEach(p -> all.add(p.getValue()));
        return all;
    }
}
