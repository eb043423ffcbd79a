package io.github.djlamp.amp.pytorch.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.GradientCollector;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * libtorch's CUDA graphs through {@link CudaGraphs}: a forward and backward made of DJL calls,
 * captured once on a side stream, then replayed on new data copied into its static input, gives the
 * eager run's loss and gradient bitwise (the same kernels in the same order). Runs where DJL sees a
 * GPU; elsewhere it checks that the binding says why there are no CUDA graphs.
 */
class CudaGraphReplayTest {

    private static final int WARM_UP = 3;

    /**
     * What the first replay's check of a step with dropout stands on: libtorch's default CUDA
     * generator's offset moves with each draw, and set back it draws the same mask again; a graph's
     * replay draws from where the offset stands, as the eager call does.
     */
    @Test
    void theGeneratorOffsetSetBackDrawsTheSameDropoutMask() {
        if (Engine.getEngine("PyTorch").getGpuCount() == 0) {
            System.out.println("CudaGraphReplayTest: DJL sees no GPU on this machine: not run");
            return;
        }
        CudaGeneratorOffset offsets =
                CudaGraphs.get()
                        .generatorOffset()
                        .orElseThrow(
                                () ->
                                        new AssertionError(
                                                "this libtorch defines no default CUDA generator"
                                                        + " offset members"));
        try (NDManager manager = NDManager.newBaseManager(Device.gpu(), "PyTorch")) {
            NDArray ones = manager.ones(new Shape(4096));
            long start = offsets.get(0);
            float[] first =
                    ones.getNDArrayInternal().dropout(ones, 0.5f, true).head().toFloatArray();
            long after = offsets.get(0);
            assertTrue(after > start, "a draw moves the offset: " + start + " -> " + after);
            float[] second =
                    ones.getNDArrayInternal().dropout(ones, 0.5f, true).head().toFloatArray();
            assertFalse(java.util.Arrays.equals(first, second), "a new draw, a new mask");
            offsets.set(0, start);
            float[] again =
                    ones.getNDArrayInternal().dropout(ones, 0.5f, true).head().toFloatArray();
            assertArrayEquals(first, again, "the offset set back draws the first mask");
            assertTrue(offsets.get(0) == after, "and moves it as the first draw did");
        }
    }

    @Test
    void aCapturedForwardAndBackwardReplaysTheEagerValues() {
        Optional<String> why = CudaGraphs.whyUnavailable();
        if (Engine.getEngine("PyTorch").getGpuCount() == 0) {
            assertTrue(why.isPresent(), "no GPU, yet CUDA graphs were found");
            System.out.println(
                    "CudaGraphReplayTest: DJL sees no GPU on this machine: not run; the binding"
                            + " says: "
                            + why.get());
            return;
        }
        assertFalse(why.isPresent(), () -> why.get());
        CudaGraphs graphs = CudaGraphs.get();
        Device gpu = Device.gpu();
        try (NDManager manager = NDManager.newBaseManager(gpu, "PyTorch")) {
            manager.getEngine().setRandomSeed(42);
            NDArray weight = manager.randomNormal(new Shape(64, 64));
            weight.setRequiresGradient(true);
            NDArray twin = weight.duplicate(); // the eager run's copy of the weight
            twin.setRequiresGradient(true);
            NDArray first = manager.randomNormal(new Shape(32, 64));
            backward(first, weight); // a gradient to zero from now on
            backward(first, twin);
            NDArray input = manager.zeros(new Shape(32, 64)); // the graph's static input
            CudaGraphs.StreamValue before = graphs.currentStream(0);
            graphs.synchronize();
            graphs.makeCurrent(graphs.sideStream(0));
            try (CudaGraphs.Graph graph = graphs.newGraph()) {
                for (int i = 0; i < WARM_UP; i++) { // libtorch's lazy set-up, off the capture
                    manager.randomNormal(input.getShape()).copyTo(input);
                    step(input, weight);
                }
                graphs.synchronize();
                graph.begin(0);
                NDArray loss = step(input, weight);
                assertTrue(graph.end(), "the capture was invalidated");
                for (int batch = 0; batch < 3; batch++) {
                    NDArray data = manager.randomNormal(input.getShape());
                    data.copyTo(input);
                    graph.replay();
                    NDArray eagerLoss = step(data, twin);
                    assertArrayEquals(
                            eagerLoss.toFloatArray(),
                            loss.toFloatArray(),
                            "loss of batch " + batch);
                    assertArrayEquals(
                            twin.getGradient().toFloatArray(),
                            weight.getGradient().toFloatArray(),
                            "weight gradient of batch " + batch);
                }
            } finally {
                graphs.synchronize();
                graphs.makeCurrent(before);
            }
        }
    }

    /**
     * A host read inside a capture (what a user's block or listener may do) fails in DJL's call
     * (libtorch's error, converted by DJL's JNI into a Java exception), the capture ends without a
     * graph, and the process goes on: eager work on the device still computes.
     */
    @Test
    void aHostReadInsideACaptureEndsItWithoutAGraphAndTheProcessGoesOn() {
        if (Engine.getEngine("PyTorch").getGpuCount() == 0) {
            System.out.println(
                    "CudaGraphReplayTest: DJL sees no GPU on this machine: the invalidated capture"
                            + " is not run (CudaGraphAbiTest runs its calls against a stand-in)");
            return;
        }
        CudaGraphs graphs = CudaGraphs.get();
        try (NDManager manager = NDManager.newBaseManager(Device.gpu(), "PyTorch")) {
            NDArray a = manager.ones(new Shape(8, 8));
            a.matMul(a).toFloatArray(); // libtorch's lazy set-up, off the capture
            CudaGraphs.StreamValue before = graphs.currentStream(0);
            graphs.synchronize();
            graphs.makeCurrent(graphs.sideStream(0));
            try (CudaGraphs.Graph graph = graphs.newGraph()) {
                graph.begin(0);
                RuntimeException read = null;
                try {
                    a.matMul(a).toFloatArray();
                } catch (RuntimeException e) {
                    read = e;
                }
                assertFalse(graph.end(), "a capture with a host read inside was kept");
                System.out.println(
                        "CudaGraphReplayTest: the host read inside the capture: "
                                + (read == null ? "returned without an exception" : read));
            } finally {
                graphs.makeCurrent(before);
            }
            assertArrayEquals(
                    new float[] {8f, 8f},
                    a.matMul(a).get("0, 0:2").toFloatArray(),
                    "eager work after the abandoned capture");
        }
    }

    /** Zeroes the weight's gradient, then loss = sum(relu(x w)^2) and its backward. */
    private static NDArray step(NDArray input, NDArray weight) {
        NDArray gradient = weight.getGradient();
        gradient.subi(gradient);
        return backward(input, weight);
    }

    private static NDArray backward(NDArray input, NDArray weight) {
        try (GradientCollector collector = Engine.getEngine("PyTorch").newGradientCollector()) {
            NDArray loss = input.matMul(weight).getNDArrayInternal().relu().square().sum();
            collector.backward(loss);
            return loss;
        }
    }
}
