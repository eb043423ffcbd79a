package io.github.djlamp.amp.pytorch.cuda;

import ai.djl.engine.Engine;
import ai.djl.pytorch.jni.LibUtils;
import com.sun.jna.Function;
import com.sun.jna.Memory;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.Structure;
import io.github.djlamp.amp.exception.AmpException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/**
 * libtorch's CUDA graphs ({@code at::cuda::CUDAGraph}) and CUDA streams ({@code c10::cuda}),
 * reached through JNA in the libtorch DJL's engine loaded, with the entry points {@link
 * CudaGraphSymbols} finds there, and the CUDA runtime's own C calls where libtorch's would throw.
 *
 * <p>A C++ exception that reaches JNA ends the JVM, so nothing here calls libtorch where it would
 * throw: {@code capture_end} throws when the capture was invalidated (a host read, a
 * synchronization or a foreign stream inside it), so the capture's status is asked of the CUDA
 * runtime first, and an invalidated capture is ended there and its graph left unused (its memory
 * pool stays reserved: a failed capture happens once, and the step then runs eagerly for good).
 */
public final class CudaGraphs {

    /** {@code cudaStreamCaptureModeThreadLocal}: see {@link Graph#begin()}. */
    private static final int CAPTURE_MODE_THREAD_LOCAL = 1;

    /** {@code cudaEventDisableTiming}: an event only to wait on. */
    private static final int EVENT_DISABLE_TIMING = 2;

    private static final int CAPTURE_STATUS_ACTIVE = 1;
    private static final int CAPTURE_STATUS_INVALIDATED = 2;

    /** More than any libtorch's {@code CUDAGraph} occupies: its size is in no header's API. */
    private static final long GRAPH_OBJECT_BYTES = 16 * 1024;

    private static final Object LOCK = new Object();
    private static volatile Object binding; // the binding, or why there is none

    /**
     * The objects of abandoned captures, kept for the process's life: libtorch's caching allocator
     * may still hold a filter that reads the object's capture stream and id.
     */
    private static final List<Memory> ABANDONED = new ArrayList<>();

    private final CudaGraphSymbols symbols;
    private final NativeLibrary torchCuda;
    private final NativeLibrary c10Cuda;
    private final NativeLibrary cudart;
    private final Map<Integer, Pointer> defaultStreamEvents = new ConcurrentHashMap<>();
    private final Optional<CudaGeneratorOffset> generatorOffset;

    private CudaGraphs(
            CudaGraphSymbols symbols,
            NativeLibrary torchCuda,
            NativeLibrary c10Cuda,
            NativeLibrary cudart,
            Optional<CudaGeneratorOffset> generatorOffset) {
        this.symbols = symbols;
        this.torchCuda = torchCuda;
        this.c10Cuda = c10Cuda;
        this.cudart = cudart;
        this.generatorOffset = generatorOffset;
    }

    /**
     * Returns the offset of libtorch's default CUDA generators, where this libtorch defines its
     * entry points.
     *
     * @return the binding, or empty
     */
    public Optional<CudaGeneratorOffset> generatorOffset() {
        return generatorOffset;
    }

    /**
     * Returns the binding.
     *
     * @return the binding
     * @throws AmpException naming why CUDA graphs cannot be reached in this process
     */
    public static CudaGraphs get() {
        Object found = resolve();
        if (found instanceof CudaGraphs) {
            return (CudaGraphs) found;
        }
        throw new AmpException("CUDA graphs cannot be used here: " + found);
    }

    /**
     * Returns why CUDA graphs cannot be reached in this process, if they cannot.
     *
     * @return the reason, or empty when {@link #get()} gives the binding
     */
    public static Optional<String> whyUnavailable() {
        Object found = resolve();
        return found instanceof String ? Optional.of((String) found) : Optional.empty();
    }

    private static Object resolve() {
        Object found = binding;
        if (found == null) {
            synchronized (LOCK) {
                if (binding == null) {
                    binding = bind();
                }
                found = binding;
            }
        }
        return found;
    }

    private static Object bind() {
        Engine.getEngine("PyTorch"); // loads libtorch and tells DJL where it is
        Path dir = Path.of(LibUtils.getLibtorchPath());
        Path torchCuda = dir.resolve(System.mapLibraryName("torch_cuda"));
        Path c10Cuda = dir.resolve(System.mapLibraryName("c10_cuda"));
        if (!Files.exists(torchCuda) || !Files.exists(c10Cuda)) {
            return "no libtorch_cuda and libc10_cuda in "
                    + dir
                    + ": DJL's PyTorch engine here is a build without CUDA";
        }
        Optional<Path> cudart = loadedCudaRuntime();
        if (cudart.isEmpty()) {
            return "no CUDA runtime (libcudart) is loaded in this process";
        }
        return bind(torchCuda, c10Cuda, cudart.get());
    }

    /**
     * Binds to the given libraries (a test's stand-ins where there is no CUDA): the binding, or why
     * there is none.
     */
    static Object bind(Path torchCuda, Path c10Cuda, Path cudart) {
        CudaGraphSymbols.Choice choice;
        Set<String> torchCudaSymbols;
        try {
            torchCudaSymbols = SharedLibrarySymbols.definedIn(torchCuda);
            choice =
                    CudaGraphSymbols.choose(
                            torchCudaSymbols, SharedLibrarySymbols.definedIn(c10Cuda));
        } catch (IOException e) {
            return "libtorch's symbols cannot be read: " + e.getMessage();
        }
        if (choice instanceof CudaGraphSymbols.Refused) {
            return ((CudaGraphSymbols.Refused) choice).why();
        }
        // DJL's engine loaded them already: JNA gets the same handles
        NativeLibrary torchCudaLibrary = NativeLibrary.getInstance(torchCuda.toString());
        return new CudaGraphs(
                ((CudaGraphSymbols.Found) choice).symbols(),
                torchCudaLibrary,
                NativeLibrary.getInstance(c10Cuda.toString()),
                NativeLibrary.getInstance(cudart.toString()),
                CudaGeneratorOffset.in(torchCudaLibrary, torchCudaSymbols));
    }

    /** The CUDA runtime libtorch_cuda brought into this process, from the process's mappings. */
    private static Optional<Path> loadedCudaRuntime() {
        Path maps = Path.of("/proc/self/maps");
        if (!Files.isReadable(maps)) {
            return Optional.empty();
        }
        try (Stream<String> lines = Files.lines(maps)) {
            return lines.map(line -> line.substring(line.lastIndexOf(' ') + 1))
                    .filter(path -> path.contains("/libcudart.so"))
                    .findFirst()
                    .map(Path::of);
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    /**
     * A CUDA stream as libtorch passes it ({@code c10::cuda::CUDAStream}: a device and a stream id,
     * 16 bytes, trivially copyable, so passed and returned by value in two registers).
     */
    public static final class StreamValue extends Structure implements Structure.ByValue {
        /** The device's type and index, with padding. */
        public long device;

        /** libtorch's stream id. */
        public long id;

        @Override
        protected List<String> getFieldOrder() {
            return List.of("device", "id");
        }

        boolean sameAs(StreamValue other) {
            return device == other.device && id == other.id;
        }
    }

    /**
     * Returns a stream of libtorch's pool for a device: a capture runs on one, never on the default
     * stream.
     *
     * @param deviceIndex the CUDA device
     * @return the stream
     */
    public StreamValue sideStream(int deviceIndex) {
        return (StreamValue)
                c10Cuda.getFunction(symbols.streamFromPool())
                        .invoke(StreamValue.class, new Object[] {0, (byte) deviceIndex});
    }

    /**
     * Returns the calling thread's current stream on a device.
     *
     * @param deviceIndex the CUDA device
     * @return the stream libtorch launches this thread's kernels on
     */
    public StreamValue currentStream(int deviceIndex) {
        return (StreamValue)
                c10Cuda.getFunction(symbols.currentStream())
                        .invoke(StreamValue.class, new Object[] {(byte) deviceIndex});
    }

    /**
     * Makes {@code stream} the calling thread's current stream on its device.
     *
     * @param stream the stream
     */
    public void makeCurrent(StreamValue stream) {
        c10Cuda.getFunction(symbols.setCurrentStream()).invokeVoid(new Object[] {stream});
    }

    /**
     * Makes the calling thread's current stream on a device wait, on the device, for the work
     * queued on its default stream so far: what other threads launched there, as DJL's data loaders
     * do for a batch. The host does not wait. A side stream of libtorch's pool does not wait for
     * the default stream by itself.
     *
     * @param deviceIndex the CUDA device, current for the calling thread
     * @param stream the raw handle of the stream that waits ({@link #rawStream})
     */
    public void awaitDefaultStream(int deviceIndex, Pointer stream) {
        Pointer event =
                defaultStreamEvents.computeIfAbsent(
                        deviceIndex,
                        k -> {
                            try (Memory made = new Memory(8)) {
                                made.setPointer(0, null);
                                check(
                                        cudart.getFunction("cudaEventCreateWithFlags")
                                                .invokeInt(
                                                        new Object[] {made, EVENT_DISABLE_TIMING}),
                                        "create an event");
                                return made.getPointer(0);
                            }
                        });
        check(
                cudart.getFunction("cudaEventRecord").invokeInt(new Object[] {event, null}),
                "record an event on the default stream");
        check(
                cudart.getFunction("cudaStreamWaitEvent")
                        .invokeInt(new Object[] {stream, event, 0}),
                "make a stream wait for the default stream");
    }

    /** Waits for every stream of the current device to finish its work. */
    public void synchronize() {
        check(cudart.getFunction("cudaDeviceSynchronize").invokeInt(new Object[0]), "synchronize");
    }

    /**
     * Makes an empty graph, to capture into.
     *
     * @return the graph
     */
    public Graph newGraph() {
        return new Graph();
    }

    /**
     * Returns a stream's raw CUDA handle ({@code cudaStream_t}).
     *
     * @param stream the stream
     * @return its handle
     */
    public Pointer rawStream(StreamValue stream) {
        return raw(stream);
    }

    private Pointer raw(StreamValue stream) {
        try (Memory value = new Memory(16)) {
            value.setLong(0, stream.device);
            value.setLong(8, stream.id);
            return c10Cuda.getFunction(symbols.rawStream()).invokePointer(new Object[] {value});
        }
    }

    private int captureStatus(Pointer rawStream) {
        try (Memory status = new Memory(4)) {
            status.setInt(0, 0);
            check(
                    cudart.getFunction("cudaStreamIsCapturing")
                            .invokeInt(new Object[] {rawStream, status}),
                    "ask the stream's capture status");
            return status.getInt(0);
        }
    }

    private void check(int error, String what) {
        if (error != 0) {
            Pointer name =
                    cudart.getFunction("cudaGetErrorString").invokePointer(new Object[] {error});
            throw new AmpException(
                    "CUDA could not "
                            + what
                            + ": error "
                            + error
                            + (name == null ? "" : " (" + name.getString(0) + ")"));
        }
    }

    /** One CUDA graph: captured once on a side stream, then replayed. */
    public final class Graph implements AutoCloseable {

        private final Memory object = new Memory(GRAPH_OBJECT_BYTES);
        private StreamValue captureStream;
        private boolean captured;
        private boolean abandoned;
        private boolean closed;

        private Graph() {
            object.clear();
            Function constructor = torchCuda.getFunction(symbols.constructor());
            if (symbols.constructorTakesKeepGraph()) {
                constructor.invokeVoid(new Object[] {object, 0});
            } else {
                constructor.invokeVoid(new Object[] {object});
            }
        }

        /**
         * Starts capturing what the calling thread launches on its current stream, which must not
         * be the default stream ({@link #sideStream} and {@link #makeCurrent} first), into this
         * graph's own memory pool. Thread-local mode: other threads (DJL's data loaders copying the
         * next batch) may use CUDA meanwhile; the autograd engine's threads launch on the streams
         * of the forward's operations, so the backward is captured too.
         *
         * @param deviceIndex the CUDA device
         * @throws AmpException when the current stream is the default one, or this graph was
         *     captured before
         */
        public void begin(int deviceIndex) {
            if (captured || captureStream != null || closed) {
                throw new AmpException("A CUDA graph is captured once: make a new one");
            }
            StreamValue current = currentStream(deviceIndex);
            if (raw(current) == null) {
                throw new AmpException(
                        "A CUDA graph cannot be captured on the default stream: make a side"
                                + " stream current first");
            }
            captureStream = current;
            Function begin = torchCuda.getFunction(symbols.captureBegin());
            if (symbols.captureBeginTakesDynamic()) {
                begin.invokeVoid(new Object[] {object, 0L, 0L, CAPTURE_MODE_THREAD_LOCAL, 0});
            } else {
                begin.invokeVoid(new Object[] {object, 0L, 0L, CAPTURE_MODE_THREAD_LOCAL});
            }
        }

        /**
         * Ends the capture and makes the graph replayable, or, when something inside invalidated
         * the capture, ends it without a graph.
         *
         * @return true when the graph can be replayed; false when the capture was invalidated (the
         *     caller runs the step eagerly and says why)
         */
        public boolean end() {
            if (captureStream == null || captured || abandoned) {
                throw new AmpException("CUDA graph: end() without begin()");
            }
            Pointer stream = raw(captureStream);
            int status = captureStatus(stream);
            if (status == CAPTURE_STATUS_ACTIVE) {
                torchCuda.getFunction(symbols.captureEnd()).invokeVoid(new Object[] {object});
                captured = true;
                return true;
            }
            if (status == CAPTURE_STATUS_INVALIDATED) {
                try (Memory graph = new Memory(8)) {
                    graph.setPointer(0, null);
                    cudart.getFunction("cudaStreamEndCapture")
                            .invokeInt(new Object[] {stream, graph});
                    Pointer made = graph.getPointer(0);
                    if (made != null) {
                        cudart.getFunction("cudaGraphDestroy").invokeInt(new Object[] {made});
                    }
                }
                cudart.getFunction("cudaGetLastError").invokeInt(new Object[0]);
            }
            abandoned = true; // libtorch's object still thinks it captures: never destroyed
            synchronized (ABANDONED) {
                ABANDONED.add(object);
            }
            return false;
        }

        /** Launches the captured work on the calling thread's current stream. */
        public void replay() {
            if (!captured || closed) {
                throw new AmpException("CUDA graph: replay() of a graph not captured");
            }
            torchCuda.getFunction(symbols.replay()).invokeVoid(new Object[] {object});
        }

        /** Frees the graph and its memory pool, unless its capture was abandoned. */
        @Override
        public void close() {
            if (closed || abandoned) {
                return;
            }
            closed = true;
            torchCuda.getFunction(symbols.destructor()).invokeVoid(new Object[] {object});
            object.close();
        }
    }
}
