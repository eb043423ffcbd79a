package io.github.djlamp.amp.pytorch;

import com.sun.jna.Function;
import com.sun.jna.NativeLibrary;
import java.util.function.Supplier;

/**
 * Runs a TorchScript call with libtorch's graph executor optimizations off ({@code
 * torch::jit::setGraphExecutorOptimize}, the calling thread's setting), put back after. Optimized,
 * from its second or third call the executor differentiates the graph with its own formulas and, on
 * a GPU, fuses pointwise operations into kernels of its own: results then differ from the eager
 * kernels' (a convolution's weight gradient by rounding, in 16 bits), and a fused kernel is one no
 * kernel check has seen. Unoptimized, the graph runs the ATen kernels DJL's eager calls run, in the
 * same order.
 */
final class UnoptimizedGraphs {

    private static final String GET = "_ZN5torch3jit24getGraphExecutorOptimizeEv";
    private static final String SET = "_ZN5torch3jit24setGraphExecutorOptimizeEb";

    private static volatile UnoptimizedGraphs instance;

    private final Function get;
    private final Function set;

    private UnoptimizedGraphs(NativeLibrary library) {
        get = library.getFunction(GET);
        set = library.getFunction(SET);
    }

    /** Returns the binding, loaded at first use. */
    static UnoptimizedGraphs get() {
        UnoptimizedGraphs found = instance;
        if (found == null) {
            synchronized (UnoptimizedGraphs.class) {
                found = instance;
                if (found == null) {
                    found = new UnoptimizedGraphs(LibtorchAutocast.library());
                    instance = found;
                }
            }
        }
        return found;
    }

    /** Runs {@code call} with the optimizations off, and puts the thread's setting back. */
    <T> T run(Supplier<T> call) {
        boolean optimizing = (get.invokeInt(new Object[0]) & 0xff) != 0;
        if (!optimizing) {
            return call.get();
        }
        set.invokeVoid(new Object[] {(byte) 0});
        try {
            return call.get();
        } finally {
            set.invokeVoid(new Object[] {(byte) 1});
        }
    }
}
