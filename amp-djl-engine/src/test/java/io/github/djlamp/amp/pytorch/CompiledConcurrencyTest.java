package io.github.djlamp.amp.pytorch;

import static io.github.djlamp.amp.pytorch.CompiledSteps.initialize;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.basic.Mlp;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/**
 * One wrapped model's compiled forward called from several threads at once, as a server's
 * predictors call it: each call gets its own input and the shared parameters, every result is the
 * one a lone call gives, and the run stays compiled (a call that received another's arguments would
 * fail in the engine and run eagerly from then on).
 */
class CompiledConcurrencyTest {

    private static final int THREADS = 6;
    private static final int CALLS = 150;
    private static final Shape INPUT = new Shape(2, 8);

    @Test
    void concurrentCompiledForwardsGiveTheLoneResults() throws Exception {
        // many small layers: many parameters a call, little arithmetic
        int[] hidden = new int[24];
        Arrays.fill(hidden, 8);
        Block mlp = new Mlp(8, 4, hidden);
        assertTrue(
                ModuleCalls.available(),
                "this DJL's native module call is reachable: calls pass their arguments as values");
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            initialize(mlp, manager, INPUT);
            MixedPrecisionBlock wrapped = Amp.wrap(mlp, "float32").compileForward(true);
            List<NDArray> inputs = new ArrayList<>();
            List<float[]> alone = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                NDArray x = manager.randomNormal(INPUT);
                inputs.add(x);
                forward(wrapped, x); // the first forward of the shape runs eagerly
                alone.add(forward(wrapped, x));
            }
            assertTrue(wrapped.isForwardCompiled(manager.getDevice()));
            ExecutorService pool = Executors.newFixedThreadPool(THREADS);
            try {
                List<Future<List<float[]>>> results = new ArrayList<>();
                for (NDArray x : inputs) {
                    results.add(
                            pool.submit(
                                    () -> {
                                        List<float[]> outputs = new ArrayList<>();
                                        for (int i = 0; i < CALLS; i++) {
                                            outputs.add(forward(wrapped, x));
                                        }
                                        return outputs;
                                    }));
                }
                for (int t = 0; t < THREADS; t++) {
                    for (float[] output : results.get(t).get()) {
                        assertArrayEquals(alone.get(t), output, 0f, "thread " + t);
                    }
                }
            } finally {
                pool.shutdownNow();
            }
            assertNull(
                    wrapped.compiledForwardRefusal(manager.getDevice()), "every call ran compiled");
        }
    }

    private static float[] forward(MixedPrecisionBlock wrapped, NDArray x) {
        try (NDManager call = x.getManager().newSubManager()) {
            return wrapped.forward(new ParameterStore(call, false), new NDList(x), false)
                    .singletonOrThrow()
                    .toFloatArray();
        }
    }
}
