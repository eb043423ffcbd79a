package io.github.djlamp.amp.pytorch.cuda;

import ai.djl.Device;
import com.sun.jna.Pointer;
import io.github.djlamp.amp.spi.StepGraph;
import io.github.djlamp.amp.spi.StepGraphs;

/**
 * libtorch's CUDA graphs as djl-amp's step graphs: the thread's work moves to a side stream of the
 * device from the warm-up on, each capture gets its own memory pool, and a capture the runtime
 * invalidated is ended without a graph ({@link CudaGraphs.Graph#end()}).
 */
public final class CudaStepGraphs implements StepGraphs {

    /**
     * A thread's stream before {@link #enter}, and the raw handle of the side stream it entered.
     */
    private record Entered(CudaGraphs.StreamValue before, Pointer side) {}

    private final ThreadLocal<Entered> entered = new ThreadLocal<>();

    @Override
    public String whyNot(Device device) {
        if (!Device.Type.GPU.equals(device.getDeviceType())) {
            return "the trainer's device is "
                    + device
                    + ", and graphs capture CUDA work (train on Device.gpu())";
        }
        return CudaGraphs.whyUnavailable().orElse(null);
    }

    /** {@inheritDoc} Where this libtorch defines its default generators' offset members. */
    @Override
    public boolean repeatsRandomDraws(Device device) {
        return whyNot(device) == null && CudaGraphs.get().generatorOffset().isPresent();
    }

    /** {@inheritDoc} The Philox offset of the device's default CUDA generator. */
    @Override
    public RandomPosition saveRandomPosition(Device device) {
        if (!repeatsRandomDraws(device)) {
            return StepGraphs.super.saveRandomPosition(device);
        }
        CudaGeneratorOffset generator = CudaGraphs.get().generatorOffset().orElseThrow();
        int index = device.getDeviceId();
        long offset = generator.get(index);
        return () -> generator.set(index, offset);
    }

    @Override
    public void enter(Device device) {
        if (entered.get() != null) {
            return;
        }
        CudaGraphs graphs = CudaGraphs.get();
        int index = device.getDeviceId();
        graphs.synchronize();
        CudaGraphs.StreamValue before = graphs.currentStream(index);
        CudaGraphs.StreamValue side = graphs.sideStream(index);
        graphs.makeCurrent(side);
        entered.set(new Entered(before, graphs.rawStream(side)));
    }

    @Override
    public void exit(Device device) {
        Entered thread = entered.get();
        if (thread == null) {
            return;
        }
        entered.remove();
        CudaGraphs graphs = CudaGraphs.get();
        graphs.synchronize();
        graphs.makeCurrent(thread.before());
    }

    @Override
    public void awaitOtherThreads(Device device) {
        Entered thread = entered.get();
        if (thread != null) {
            CudaGraphs.get().awaitDefaultStream(device.getDeviceId(), thread.side());
        }
    }

    @Override
    public StepGraph capture(Device device, Runnable region) {
        if (entered.get() == null) {
            throw new IllegalStateException("capture(...) before enter(device) on this thread");
        }
        CudaGraphs graphs = CudaGraphs.get();
        graphs.synchronize();
        CudaGraphs.Graph graph = graphs.newGraph();
        graph.begin(device.getDeviceId());
        RuntimeException failed = null;
        try {
            region.run();
        } catch (RuntimeException e) {
            failed = e;
        }
        boolean replayable = graph.end();
        if (failed != null) {
            graph.close();
            throw failed;
        }
        if (!replayable) {
            return null;
        }
        graph.replay();
        return new StepGraph() {
            @Override
            public void replay() {
                graph.replay();
            }

            @Override
            public void close() {
                graphs.synchronize(); // its last replay may still run: then its pool goes
                graph.close();
            }
        };
    }
}
