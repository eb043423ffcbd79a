package io.github.djlamp.amp.pytorch.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import io.github.djlamp.amp.exception.AmpException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link CudaGraphs}' JNA calls against a stand-in library ({@code cuda-abi/stand_in_cuda.cpp},
 * compiled here with g++) that declares libtorch's CUDA graph and stream functions with their real
 * C++ signatures and logs what each receives: the streams passed and returned by value, the graph's
 * object, the pool and capture mode, the defaulted flags. On a machine without CUDA this is what
 * can be checked of the binding before a GPU runs it ({@link CudaGraphReplayTest}).
 */
class CudaGraphAbiTest {

    private static final long STREAM_ID = 77;

    @Test
    void callsPassWhatLibtorchsSignaturesExpect(@TempDir Path dir) throws Exception {
        Path library = compile(dir, "libstand_new.so");
        if (library == null) {
            return;
        }
        CudaGraphs graphs = bind(library);
        CudaGraphs.StreamValue side = graphs.sideStream(0);
        assertEquals(1, side.device & 0xff, "device type CUDA");
        assertEquals(0, (side.device >> 8) & 0xff, "device index");
        assertEquals(STREAM_ID, side.id);
        graphs.makeCurrent(side);
        assertTrue(graphs.currentStream(0).sameAs(side));
        graphs.synchronize();
        try (CudaGraphs.Graph graph = graphs.newGraph()) {
            graph.begin(0);
            assertTrue(graph.end());
            graph.replay();
            graph.replay();
        }
        assertEquals(
                "pool(0,0) current(1,0,77) sync graph(0) begin(0,0,1,0,4242) status(4173)"
                        + " end(4242) replay(4242) replay(4242) ~graph(4242)",
                record(library));
    }

    /**
     * The side stream waits for the default stream's queued work through one event made once with
     * timing off, recorded on the default (null) stream, waited on by the side stream's raw handle
     * (4173 in the stand-in) with no flags.
     */
    @Test
    void theSideStreamWaitsForTheDefaultStreamOnTheDevice(@TempDir Path dir) throws Exception {
        Path library = compile(dir, "libstand_wait.so");
        if (library == null) {
            return;
        }
        CudaGraphs graphs = bind(library);
        CudaGraphs.StreamValue side = graphs.sideStream(0);
        graphs.makeCurrent(side);
        Pointer raw = graphs.rawStream(side);
        graphs.awaitDefaultStream(0, raw);
        graphs.awaitDefaultStream(0, raw);
        assertEquals(
                "pool(0,0) current(1,0,77) event(2) record(5151,0) wait(4173,5151,0)"
                        + " record(5151,0) wait(4173,5151,0)",
                record(library));
    }

    /**
     * The default generator's offset is read and set through the generator libtorch returns by
     * reference (its first word the implementation), on the device asked for; an offset that
     * libtorch's {@code set_offset} would throw for is refused before any call.
     */
    @Test
    void theGeneratorOffsetIsReadAndPutBack(@TempDir Path dir) throws Exception {
        Path library = compile(dir, "libstand_generator.so");
        if (library == null) {
            return;
        }
        CudaGeneratorOffset generator = bind(library).generatorOffset().orElseThrow();
        NativeLibrary stand = NativeLibrary.getInstance(library.toString());
        long saved = generator.get(0);
        assertEquals(8, saved);
        stand.getFunction("stand_in_draw").invokeVoid(new Object[] {40L});
        assertEquals(48, generator.get(0));
        generator.set(0, saved);
        assertEquals(8, stand.getFunction("stand_in_offset").invokeLong(new Object[0]));
        assertThrows(AmpException.class, () -> generator.set(0, 10));
        assertEquals(
                "generator(0) offset(6161) generator(0) offset(6161) generator(0)"
                        + " set_offset(6161,8)",
                record(library));
    }

    @Test
    void pyTorch27sSignatures(@TempDir Path dir) throws Exception {
        Path library = compile(dir, "libstand_old.so", "-DOLD_SIGNATURES");
        if (library == null) {
            return;
        }
        CudaGraphs graphs = bind(library);
        graphs.makeCurrent(graphs.sideStream(0));
        try (CudaGraphs.Graph graph = graphs.newGraph()) {
            graph.begin(0);
            assertTrue(graph.end());
            graph.replay();
        }
        assertEquals(
                "pool(0,0) current(1,0,77) graph() begin(0,0,1,4242) status(4173) end(4242)"
                        + " replay(4242) ~graph(4242)",
                record(library));
    }

    @Test
    void anInvalidatedCaptureEndsWithoutAGraphAndIsNeverReplayed(@TempDir Path dir)
            throws Exception {
        Path library = compile(dir, "libstand_invalid.so");
        if (library == null) {
            return;
        }
        CudaGraphs graphs = bind(library);
        CudaGraphs.StreamValue defaultStream = graphs.currentStream(0);
        try (CudaGraphs.Graph graph = graphs.newGraph()) {
            AmpException refused = assertThrows(AmpException.class, () -> graph.begin(0));
            assertTrue(refused.getMessage().contains("default stream"), refused.getMessage());
        }
        graphs.makeCurrent(graphs.sideStream(0));
        CudaGraphs.Graph graph = graphs.newGraph();
        graph.begin(0);
        NativeLibrary.getInstance(library.toString())
                .getFunction("stand_in_invalidate")
                .invokeVoid(new Object[0]);
        assertFalse(graph.end());
        assertThrows(AmpException.class, graph::replay);
        graph.close();
        graphs.makeCurrent(defaultStream);
        String record = record(library);
        assertTrue(record.contains("begin(0,0,1,0,4242) status(4173) abort "), record);
        assertFalse(record.contains("end(4242)"), "libtorch's capture_end would throw: " + record);
        assertFalse(record.contains("~graph(4242) graph"), "the abandoned object is kept");
    }

    private static CudaGraphs bind(Path library) {
        Object bound = CudaGraphs.bind(library, library, library);
        assertInstanceOf(CudaGraphs.class, bound, String.valueOf(bound));
        return (CudaGraphs) bound;
    }

    private static String record(Path library) {
        return NativeLibrary.getInstance(library.toString())
                .getFunction("stand_in_record")
                .invokeString(new Object[0], false)
                .trim();
    }

    /** Compiles the stand-in, or says why it cannot be and returns null. */
    private static Path compile(Path dir, String name, String... defines)
            throws IOException, InterruptedException {
        Path source = dir.resolve("stand_in_cuda.cpp");
        try (InputStream in =
                CudaGraphAbiTest.class.getResourceAsStream("/cuda-abi/stand_in_cuda.cpp")) {
            Files.copy(in, source);
        }
        Path library = dir.resolve(name);
        java.util.List<String> command =
                new java.util.ArrayList<>(
                        java.util.List.of(
                                "g++", "-shared", "-fPIC", "-O1", "-o", library.toString()));
        command.addAll(java.util.List.of(defines));
        command.add(source.toString());
        Process gcc;
        try {
            gcc = new ProcessBuilder(command).redirectErrorStream(true).start();
        } catch (IOException e) {
            System.out.println(
                    "CudaGraphAbiTest: no g++ on this machine to build the stand-in library: not"
                            + " run ("
                            + e.getMessage()
                            + ")");
            return null;
        }
        String output = new String(gcc.getInputStream().readAllBytes());
        assertTrue(gcc.waitFor(120, TimeUnit.SECONDS), "g++ took over 2 minutes");
        assertEquals(0, gcc.exitValue(), output);
        return library;
    }
}
