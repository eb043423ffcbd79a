package io.github.djlamp.amp.pytorch.cuda;

import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * Which of libtorch's C++ entry points for CUDA graphs and streams this libtorch defines, and how
 * each is called: the mangled names differ between PyTorch versions ({@code CUDAGraph()} became
 * {@code CUDAGraph(bool keep_graph)}; some builds give {@code capture_begin} a third parameter).
 * Only signatures read in PyTorch's headers are accepted; any other is refused with the names
 * found, rather than called with a guessed argument list.
 *
 * @param constructor {@code at::cuda::CUDAGraph}'s complete-object constructor
 * @param constructorTakesKeepGraph whether it takes {@code bool keep_graph} (passed false: the
 *     graph is instantiated at {@code capture_end}, as in the versions without the parameter)
 * @param captureBegin {@code capture_begin(MempoolId_t pool, cudaStreamCaptureMode mode ...)}
 * @param captureBeginTakesDynamic whether it takes a trailing {@code bool dynamic_graph} (false)
 * @param captureEnd {@code capture_end()}
 * @param replay {@code replay()}
 * @param destructor the complete-object destructor
 * @param streamFromPool {@code c10::cuda::getStreamFromPool(bool high_priority, DeviceIndex)}
 * @param currentStream {@code c10::cuda::getCurrentCUDAStream(DeviceIndex)}
 * @param setCurrentStream {@code c10::cuda::setCurrentCUDAStream(CUDAStream)}
 * @param rawStream {@code c10::cuda::CUDAStream::stream() const}, the CUDA runtime's handle
 */
record CudaGraphSymbols(
        String constructor,
        boolean constructorTakesKeepGraph,
        String captureBegin,
        boolean captureBeginTakesDynamic,
        String captureEnd,
        String replay,
        String destructor,
        String streamFromPool,
        String currentStream,
        String setCurrentStream,
        String rawStream) {

    static final String GRAPH = "_ZN2at4cuda9CUDAGraph";
    private static final String POOL_AND_MODE = "ESt4pairIyyE21cudaStreamCaptureMode";

    /** What libtorch_cuda and libc10_cuda define: the symbols, or why they cannot be used. */
    sealed interface Choice permits Found, Refused {}

    /** The entry points, all known. */
    record Found(CudaGraphSymbols symbols) implements Choice {}

    /** What was missing or unknown, in a sentence. */
    record Refused(String why) implements Choice {}

    /**
     * Chooses the entry points from the libraries' defined symbols.
     *
     * @param torchCuda what libtorch_cuda defines
     * @param c10Cuda what libc10_cuda defines
     * @return the symbols, or why CUDA graphs cannot be reached through them
     */
    static Choice choose(Set<String> torchCuda, Set<String> c10Cuda) {
        String constructor = first(torchCuda, GRAPH + "C1Ev", GRAPH + "C1Eb");
        String begin =
                first(
                        torchCuda,
                        GRAPH + "13capture_begin" + POOL_AND_MODE,
                        GRAPH + "13capture_begin" + POOL_AND_MODE + "b");
        String end = first(torchCuda, GRAPH + "11capture_endEv");
        String replay = first(torchCuda, GRAPH + "6replayEv");
        String destructor = first(torchCuda, GRAPH + "D1Ev");
        String fromPool = first(c10Cuda, "_ZN3c104cuda17getStreamFromPoolEba");
        String current = first(c10Cuda, "_ZN3c104cuda20getCurrentCUDAStreamEa");
        String setCurrent = first(c10Cuda, "_ZN3c104cuda20setCurrentCUDAStreamENS0_10CUDAStreamE");
        String raw = first(c10Cuda, "_ZNK3c104cuda10CUDAStream6streamEv");
        if (constructor == null || begin == null || end == null || replay == null) {
            return new Refused(
                    "libtorch_cuda defines no CUDAGraph constructor, capture_begin, capture_end"
                            + " or replay of a signature djl-amp knows; it defines "
                            + found(torchCuda, GRAPH));
        }
        if (destructor == null) {
            return new Refused("libtorch_cuda defines no CUDAGraph destructor");
        }
        if (fromPool == null || current == null || setCurrent == null || raw == null) {
            return new Refused(
                    "libc10_cuda defines no getStreamFromPool(bool, DeviceIndex),"
                            + " getCurrentCUDAStream(DeviceIndex), setCurrentCUDAStream(CUDAStream)"
                            + " or CUDAStream::stream(); it defines "
                            + found(c10Cuda, "_ZN3c104cuda"));
        }
        return new Found(
                new CudaGraphSymbols(
                        constructor,
                        constructor.endsWith("Eb"),
                        begin,
                        begin.endsWith("b"),
                        end,
                        replay,
                        destructor,
                        fromPool,
                        current,
                        setCurrent,
                        raw));
    }

    /** The first of {@code candidates} that {@code symbols} holds, or null. */
    private static String first(Set<String> symbols, String... candidates) {
        for (String candidate : candidates) {
            if (symbols.contains(candidate)) {
                return candidate;
            }
        }
        return null;
    }

    private static String found(Set<String> symbols, String prefix) {
        List<String> names =
                symbols.stream()
                        .filter(name -> name.startsWith(prefix))
                        .limit(12)
                        .collect(Collectors.toList());
        return names.isEmpty() ? "none under " + prefix : String.join(", ", names);
    }
}
