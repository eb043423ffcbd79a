package io.github.djlamp.amp.verify;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.loss.Loss;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.pytorch.ForkedJvm;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Kernel verdicts kept on disk: reused by a later JVM without running the kernel, a failed verdict
 * as failed, a damaged or foreign file ignored with a WARN, and {@link VerdictMemory#RECHECK}
 * checking again. What the checks decide is the platform's business: these tests assert only that a
 * kept verdict is the one reached before.
 */
class RememberedVerdictsTest {

    private static final Pattern LINE =
            Pattern.compile("kept-verdict (\\w+) outcome=(\\w+) remembered=(\\w+) checked=(\\w+)");

    private static final List<MemoryLayout> LAYOUTS = List.of(MemoryLayout.CONTIGUOUS);

    @TempDir Path folder;

    @BeforeEach
    void rememberInAFreshFolder() {
        KernelVerdicts.forgetAll();
        RememberedVerdicts.use(VerdictMemory.REMEMBER, folder);
    }

    @AfterEach
    void stopRemembering() {
        RememberedVerdicts.use(VerdictMemory.OFF, folder);
        KernelVerdicts.forgetAll();
    }

    @Test
    void aVerdictKeptByOneJvmIsReusedByTheNextWithoutRunningTheKernel() throws Exception {
        List<String[]> first = child(VerdictMemory.REMEMBER);
        List<String[]> second = child(VerdictMemory.REMEMBER);
        for (int i = 0; i < 2; i++) {
            assertEquals("false", first.get(i)[2], "first JVM: nothing kept yet");
            assertEquals("true", first.get(i)[3], "first JVM: the kernel was checked");
            assertEquals(first.get(i)[1], second.get(i)[1], "the kept verdict is the one reached");
            assertEquals("true", second.get(i)[2], "second JVM: the verdict was kept");
            assertEquals("false", second.get(i)[3], "second JVM: no kernel ran for the check");
        }
        // a wrong kernel's verdict is kept as a failure, not as a pass
        assertTrue(
                second.get(1)[1].equals("FP32_FALLBACK")
                        || second.get(1)[1].equals("PLATFORM_UNSOUND"),
                "the wrong kernel: " + second.get(1)[1]);

        List<String[]> rechecked = child(VerdictMemory.RECHECK);
        for (String[] line : rechecked) {
            assertEquals("false", line[2], "recheck reuses nothing: " + String.join(" ", line));
            assertEquals("true", line[3], "recheck runs the kernel: " + String.join(" ", line));
        }
    }

    @Test
    void aFailedVerdictIsKeptAsFailed() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            String[] first = parse(wrongConv(backend, manager));
            assertFalse(first[1].equals("VERIFIED"), String.join(" ", first));
            freshJvm();
            String[] second = parse(wrongConv(backend, manager));
            assertEquals(first[1], second[1]);
            assertEquals("true", second[2], "kept");
            assertEquals("false", second[3], "not checked again");
        }
    }

    @Test
    void aDamagedFileIsIgnoredWithAWarn() throws Exception {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            rightConv(backend, manager);
            Path file = onlyFile();
            String text = Files.readString(file);
            // the last line, with the count, is lost: a truncated write
            Files.writeString(file, text.substring(0, text.lastIndexOf("end\t")));
            assertIgnoredWithAWarn(backend, manager, "truncated");
        }
    }

    @Test
    void aFileOfAnotherKeyIsIgnoredWithAWarn() throws Exception {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            rightConv(backend, manager);
            Path file = onlyFile();
            // a well-formed file, written for another microcode, under this machine's file name
            String text = Files.readString(file);
            Files.writeString(file, text.replaceFirst("microcode [^\\\\]*", "microcode 0xdead"));
            assertIgnoredWithAWarn(backend, manager, "another machine");
        }
    }

    @Test
    void recheckIgnoresTheFileAndKeepsTheNewVerdict() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            rightConv(backend, manager);
            RememberedVerdicts.use(VerdictMemory.RECHECK, folder);
            String[] rechecked = parse(rightConv(backend, manager));
            assertEquals("false", rechecked[2], "recheck reuses nothing");
            assertEquals("true", rechecked[3], "recheck runs the kernel");
            freshJvm();
            assertEquals(
                    "true", parse(rightConv(backend, manager))[2], "what recheck found is kept");
        }
    }

    @Test
    void theRecheckOptionOfAmpOptionsIsAppliedByAmpConfigure() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            rightConv(backend, manager);
            freshJvm();
            AmpOptions options =
                    AmpOptions.builder()
                            .verdictMemory(VerdictMemory.RECHECK)
                            .verdictDirectory(folder)
                            .build();
            Amp.configure(
                    new DefaultTrainingConfig(Loss.l2Loss()),
                    Amp.wrap(KeptVerdictChild.conv(), "float32"),
                    options);
            String[] rechecked = parse(rightConv(backend, manager));
            assertEquals("false", rechecked[2], "the option reuses nothing");
            assertEquals("true", rechecked[3], "the option runs the kernel");
        }
    }

    /**
     * What the engine's in-process cure reads before its first kernel: a kernel check that found
     * fp32 itself wrong, or a platform check whose cure mended its defects, kept for this key.
     */
    @Test
    void anUnsoundVerdictKeptForThisKeyIsFound() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            String key = RememberedVerdicts.keyFor(backend);
            rightConv(backend, manager);
            assertFalse(RememberedVerdicts.current().keptPlatformUnsound(key), "a right kernel");
            KeptVerdictChild.line(
                    "wrongInFp32", backend, WrongLowPrecisionConv2d.wrongInFp32(8, 3, 1), manager);
            freshJvm();
            assertTrue(RememberedVerdicts.current().keptPlatformUnsound(key), "fp32 found wrong");

            RememberedVerdicts.use(VerdictMemory.OFF, folder);
            Path other = folder.resolve("other");
            RememberedVerdicts.use(VerdictMemory.REMEMBER, other);
            RememberedVerdicts memory = RememberedVerdicts.current();
            memory.remember(
                    key,
                    RememberedVerdicts.PLATFORM_VERDICT,
                    "cpu()",
                    List.of("no-known-cure", "DID_NOT_CURE"));
            assertFalse(memory.keptPlatformUnsound(key), "no cure known");
            memory.remember(
                    key,
                    RememberedVerdicts.PLATFORM_VERDICT,
                    "cpu()",
                    List.of(RememberedVerdicts.PLATFORM_UNSOUND_CURABLE, "VERIFIED"));
            assertTrue(memory.keptPlatformUnsound(key), "the platform check's verdict");
            RememberedVerdicts.use(VerdictMemory.RECHECK, other);
            assertFalse(
                    RememberedVerdicts.current().keptPlatformUnsound(key), "recheck trusts none");
        }
    }

    /**
     * A first batch with one NaN keeps no "fp32 is wrong" verdict for the next JVM's cure to act
     * on: before, the check's fp32 reference met the direct sum's NaN, and every later run on the
     * machine capped oneDNN's ISA (and `auto` chose fp32 on an AVX512-BF16 CPU). Where this
     * machine's fp32 kernels are wrong at this signature with a finite input too, the verdict is
     * the platform's and nothing is asserted of it.
     */
    @Test
    void aNanInTheFirstBatchKeepsNoUnsoundVerdict() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            String key = RememberedVerdicts.keyFor(backend);
            Shape input = new Shape(4, 16);
            Layers.check(backend, linear(), input, Precision.BF16, LAYOUTS, manager);
            freshJvm();
            boolean finiteUnsound = RememberedVerdicts.current().keptPlatformUnsound(key);
            RememberedVerdicts.use(VerdictMemory.OFF, folder);
            folder = folder.resolve("nan");
            freshJvm();
            Layers.check(
                    backend,
                    linear(),
                    input,
                    Precision.BF16,
                    LAYOUTS,
                    manager,
                    x -> {
                        x.set(new ai.djl.ndarray.index.NDIndex(0, 0), Float.NaN);
                        return x;
                    });
            freshJvm();
            boolean nanUnsound = RememberedVerdicts.current().keptPlatformUnsound(key);
            System.out.println(
                    "kept unsound: finite input " + finiteUnsound + ", NaN " + nanUnsound);
            assertTrue(!nanUnsound || finiteUnsound, "a NaN in the data is no platform defect");
        }
    }

    private static Block linear() {
        return ai.djl.nn.core.Linear.builder().setUnits(8).build();
    }

    private void assertIgnoredWithAWarn(AmpBackend backend, NDManager manager, String why) {
        freshJvm();
        PrintStream err = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        String[] again;
        System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            again = parse(rightConv(backend, manager));
        } finally {
            System.setErr(err);
        }
        String log = captured.toString(StandardCharsets.UTF_8);
        assertEquals("false", again[2], "the file is not trusted");
        assertEquals("true", again[3], "the kernel is checked again");
        assertTrue(log.contains("WARN") && log.contains("ignoring the kept verdicts"), log);
        assertTrue(log.contains(why), log);
        // and the file is rewritten, right, for the next JVM
        freshJvm();
        assertEquals("true", parse(rightConv(backend, manager))[2]);
    }

    /** What a new JVM sees: no verdict in memory, the folder read afresh. */
    private void freshJvm() {
        KernelVerdicts.forgetAll();
        RememberedVerdicts.use(VerdictMemory.OFF, folder);
        RememberedVerdicts.use(VerdictMemory.REMEMBER, folder);
    }

    private Path onlyFile() throws Exception {
        try (var files = Files.list(folder)) {
            List<Path> all = files.toList();
            assertEquals(1, all.size(), all.toString());
            return all.get(0);
        }
    }

    private static String rightConv(AmpBackend backend, NDManager manager) {
        return KeptVerdictChild.line("right", backend, KeptVerdictChild.conv(), manager);
    }

    private static String wrongConv(AmpBackend backend, NDManager manager) {
        return KeptVerdictChild.line(
                "wrong", backend, WrongLowPrecisionConv2d.create(8, 5, 2), manager);
    }

    private List<String[]> child(VerdictMemory memory) throws Exception {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx1g");
        command.add("-Dai.djl.offline=true");
        command.add("-D" + VerdictMemory.PROPERTY + "=" + memory.name().toLowerCase());
        command.add("-D" + RememberedVerdicts.DIRECTORY_PROPERTY + "=" + folder);
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(KeptVerdictChild.class.getName());
        ForkedJvm.Result result = ForkedJvm.run(command);
        assertEquals(0, result.exitCode, result.output);
        List<String[]> lines = new ArrayList<>();
        Matcher m = LINE.matcher(result.output);
        while (m.find()) {
            lines.add(new String[] {m.group(1), m.group(2), m.group(3), m.group(4)});
        }
        assertEquals(2, lines.size(), result.output);
        return lines;
    }

    private static String[] parse(String line) {
        Matcher m = LINE.matcher(line);
        assertTrue(m.matches(), line);
        return new String[] {m.group(1), m.group(2), m.group(3), m.group(4)};
    }
}
