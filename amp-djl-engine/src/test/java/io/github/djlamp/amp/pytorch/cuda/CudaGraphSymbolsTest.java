package io.github.djlamp.amp.pytorch.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Which CUDA graph entry points are chosen from a libtorch's symbols. The mangled names are g++'s
 * for declarations copied from PyTorch's {@code CUDAGraph.h} and {@code CUDAStream.h} (2.7's {@code
 * CUDAGraph()}, the later {@code CUDAGraph(bool keep_graph)}, a {@code capture_begin} with a
 * trailing {@code bool dynamic_graph}), compiled on 2026-11-29 and listed with {@code nm}: not
 * derived from the code under test.
 */
class CudaGraphSymbolsTest {

    private static final Set<String> C10_CUDA =
            Set.of(
                    "_ZN3c104cuda17getStreamFromPoolEba",
                    "_ZN3c104cuda17getStreamFromPoolEia",
                    "_ZN3c104cuda20getCurrentCUDAStreamEa",
                    "_ZN3c104cuda20setCurrentCUDAStreamENS0_10CUDAStreamE",
                    "_ZNK3c104cuda10CUDAStream6streamEv");

    private static Set<String> torchCuda(String constructor, String captureBegin) {
        Set<String> symbols = new HashSet<>();
        symbols.add(constructor);
        symbols.add(captureBegin);
        symbols.add("_ZN2at4cuda9CUDAGraph11capture_endEv");
        symbols.add("_ZN2at4cuda9CUDAGraph6replayEv");
        symbols.add("_ZN2at4cuda9CUDAGraphD1Ev");
        symbols.add("_ZN2at4cuda9CUDAGraphD2Ev");
        return symbols;
    }

    private static CudaGraphSymbols found(CudaGraphSymbols.Choice choice) {
        assertInstanceOf(CudaGraphSymbols.Found.class, choice, choice.toString());
        return ((CudaGraphSymbols.Found) choice).symbols();
    }

    @Test
    void pyTorch27sSignatures() {
        CudaGraphSymbols symbols =
                found(
                        CudaGraphSymbols.choose(
                                torchCuda(
                                        "_ZN2at4cuda9CUDAGraphC1Ev",
                                        "_ZN2at4cuda9CUDAGraph13capture_beginESt4pairIyyE21cudaStreamCaptureMode"),
                                C10_CUDA));
        assertFalse(symbols.constructorTakesKeepGraph());
        assertFalse(symbols.captureBeginTakesDynamic());
        assertEquals("_ZN2at4cuda9CUDAGraphD1Ev", symbols.destructor());
        assertEquals("_ZN3c104cuda17getStreamFromPoolEba", symbols.streamFromPool());
    }

    @Test
    void aConstructorTakingKeepGraph() {
        CudaGraphSymbols symbols =
                found(
                        CudaGraphSymbols.choose(
                                torchCuda(
                                        "_ZN2at4cuda9CUDAGraphC1Eb",
                                        "_ZN2at4cuda9CUDAGraph13capture_beginESt4pairIyyE21cudaStreamCaptureMode"),
                                C10_CUDA));
        assertTrue(symbols.constructorTakesKeepGraph());
        assertFalse(symbols.captureBeginTakesDynamic());
    }

    @Test
    void aCaptureBeginTakingDynamicGraph() {
        CudaGraphSymbols symbols =
                found(
                        CudaGraphSymbols.choose(
                                torchCuda(
                                        "_ZN2at4cuda9CUDAGraphC1Eb",
                                        "_ZN2at4cuda9CUDAGraph13capture_beginESt4pairIyyE21cudaStreamCaptureModeb"),
                                C10_CUDA));
        assertTrue(symbols.captureBeginTakesDynamic());
    }

    @Test
    void anUnknownCaptureBeginIsRefusedNamingWhatWasFound() {
        CudaGraphSymbols.Choice choice =
                CudaGraphSymbols.choose(
                        torchCuda(
                                "_ZN2at4cuda9CUDAGraphC1Ev",
                                "_ZN2at4cuda9CUDAGraph13capture_beginESt4pairIyyE21cudaStreamCaptureModei"),
                        C10_CUDA);
        assertInstanceOf(CudaGraphSymbols.Refused.class, choice);
        String why = ((CudaGraphSymbols.Refused) choice).why();
        assertTrue(why.contains("of a signature djl-amp knows"), why);
        assertTrue(why.contains("cudaStreamCaptureModei"), why);
    }

    @Test
    void missingStreamCallsAreRefused() {
        Set<String> c10 = new HashSet<>(C10_CUDA);
        c10.remove("_ZN3c104cuda17getStreamFromPoolEba");
        CudaGraphSymbols.Choice choice =
                CudaGraphSymbols.choose(
                        torchCuda(
                                "_ZN2at4cuda9CUDAGraphC1Ev",
                                "_ZN2at4cuda9CUDAGraph13capture_beginESt4pairIyyE21cudaStreamCaptureMode"),
                        c10);
        assertInstanceOf(CudaGraphSymbols.Refused.class, choice);
        assertTrue(((CudaGraphSymbols.Refused) choice).why().contains("getStreamFromPool"));
    }
}
