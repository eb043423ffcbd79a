package io.github.djlamp.amp.pytorch;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.pytorch.jni.LibUtils;
import com.sun.jna.Function;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Finds which instruction set oneDNN runs in this process: turns oneDNN's verbose mode on through
 * libtorch ({@code torch::verbose::_mkldnn_set_verbose}), runs one small convolution with standard
 * output redirected into a pipe, and reads the ISA oneDNN names ({@code isa:Intel AVX2}, printed
 * the first time verbose output is made) or, failing that, the ISA in its kernels' names ({@code
 * brg_conv_fwd:avx512_core}). What oneDNN printed is not shown to the user; nor is what another
 * thread prints to standard output in those few milliseconds. It runs only where the cure is
 * applied, once per process.
 */
final class OneDnnIsaProbe {

    private static final String SET_VERBOSE = "_ZN5torch7verbose19_mkldnn_set_verboseEi";
    private static final int F_SETFL = 4;
    private static final int O_NONBLOCK = 04000;

    /** The rank of no cap: above every ISA level (SSE41 1, AVX 2, AVX2 3, AVX-512 5, AMX 6). */
    private static final int NO_CAP = 7;

    private OneDnnIsaProbe() {}

    /** What the probe saw: the verbose lines oneDNN printed. */
    static final class Seen {
        final List<String> lines;

        Seen(List<String> lines) {
            this.lines = lines;
        }

        /** The highest ISA rank oneDNN named, 0 when it named none. */
        int rank() {
            for (String line : lines) {
                int at = line.indexOf("isa:");
                if (at >= 0) {
                    return rankOfIsaText(line.substring(at + 4));
                }
            }
            // no header (verbose output was made before): the kernels' names, e.g. jit:avx2
            int highest = 0;
            for (String line : lines) {
                if (line.contains(",exec,") || line.contains(",create:")) {
                    for (String field : line.split(",")) {
                        highest = Math.max(highest, rankOfKernelName(field));
                    }
                }
            }
            return highest;
        }

        /** Whether oneDNN named an ISA no higher than {@code cap}. */
        boolean runsAtMost(String cap) {
            int rank = rank();
            return rank > 0 && rank <= rankOfCap(cap);
        }

        @Override
        public String toString() {
            return String.join(" | ", lines);
        }
    }

    /** Runs the probe on the CPU. */
    static Seen probe() {
        Engine.getEngine("PyTorch");
        NativeLibrary torch =
                NativeLibrary.getInstance(
                        Path.of(LibUtils.getLibtorchPath())
                                .resolve(System.mapLibraryName("torch_cpu"))
                                .toString());
        Function setVerbose = torch.getFunction(SET_VERBOSE);
        NativeLibrary c = NativeLibrary.getInstance(com.sun.jna.Platform.C_LIBRARY_NAME);
        Function fflush = c.getFunction("fflush");
        Function dup = c.getFunction("dup");
        Function dup2 = c.getFunction("dup2");
        Function close = c.getFunction("close");
        Function pipe = c.getFunction("pipe");
        Function fcntl = c.getFunction("fcntl");
        Function read = c.getFunction("read");

        System.out.flush();
        fflush.invokeInt(new Object[] {Pointer.NULL});
        int[] fds = new int[2];
        if (pipe.invokeInt(new Object[] {fds}) != 0) {
            throw new IllegalStateException("pipe failed: errno " + Native.getLastError());
        }
        fcntl.invokeInt(new Object[] {fds[0], F_SETFL, O_NONBLOCK});
        int saved = dup.invokeInt(new Object[] {1});
        StringBuilder text = new StringBuilder();
        try {
            dup2.invokeInt(new Object[] {fds[1], 1});
            setVerbose.invokeVoid(new Object[] {1});
            try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
                // libtorch hands a convolution this large to oneDNN (one of 1 sample it does not)
                NDArray input = manager.ones(new Shape(4, 8, 16, 16));
                NDArray weight = manager.ones(new Shape(8, 8, 3, 3));
                Conv2d.conv2d(input, weight).singletonOrThrow().toFloatArray();
            } finally {
                setVerbose.invokeVoid(new Object[] {0});
                fflush.invokeInt(new Object[] {Pointer.NULL});
            }
        } finally {
            dup2.invokeInt(new Object[] {saved, 1});
            close.invokeInt(new Object[] {saved});
            close.invokeInt(new Object[] {fds[1]});
            byte[] buffer = new byte[8192];
            long n;
            while ((n = read.invokeLong(new Object[] {fds[0], buffer, (long) buffer.length})) > 0) {
                text.append(new String(buffer, 0, (int) n, StandardCharsets.UTF_8));
            }
            close.invokeInt(new Object[] {fds[0]});
        }
        List<String> lines = new ArrayList<>();
        for (String line : text.toString().split("\n")) {
            if (line.contains("verbose")) {
                lines.add(line.trim());
            }
        }
        return new Seen(lines);
    }

    static int rankOfCap(String cap) {
        String name = cap.trim().toUpperCase(Locale.ROOT);
        if (name.contains("AMX")) {
            return 6;
        }
        if (name.startsWith("AVX512") || name.startsWith("AVX10")) {
            return 5;
        }
        if (name.startsWith("AVX2")) {
            return 3;
        }
        if (name.equals("AVX")) {
            return 2;
        }
        if (name.equals("SSE41")) {
            return 1;
        }
        return NO_CAP; // ALL, DEFAULT, or a value oneDNN ignores
    }

    private static int rankOfIsaText(String isa) {
        String text = isa.toUpperCase(Locale.ROOT);
        if (text.contains("AMX")) {
            return 6;
        }
        if (text.contains("AVX-512") || text.contains("AVX512") || text.contains("AVX10")) {
            return 5;
        }
        if (text.contains("AVX2")) {
            return 3;
        }
        if (text.contains("AVX")) {
            return 2;
        }
        return text.contains("SSE4") ? 1 : 0;
    }

    private static int rankOfKernelName(String field) {
        String name = field.toLowerCase(Locale.ROOT);
        int colon = name.indexOf(':');
        if (colon < 0) {
            return 0;
        }
        String isa = name.substring(colon + 1);
        if (isa.contains("amx")) {
            return 6;
        }
        if (isa.contains("avx512") || isa.contains("avx10")) {
            return 5;
        }
        if (isa.contains("avx2")) {
            return 3;
        }
        if (isa.startsWith("avx")) {
            return 2;
        }
        return isa.startsWith("sse41") ? 1 : 0;
    }
}
