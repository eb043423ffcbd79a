package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.djlamp.amp.verify.CacheTopology;
import java.io.DataInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * On a CPU whose kernel hides its cache topology (taken for one through {@value
 * CacheTopology#TEST_PROPERTY}, read in each child JVM from its start), {@code Amp.configure} turns
 * libtorch's oneDNN off for the process, says so once, and training's convolutions, forward and
 * backward, then run libtorch's own kernels: oneDNN's own verbose report ({@code ONEDNN_VERBOSE=1})
 * names none, and the weights after a few SGD steps match those trained on oneDNN within fp32
 * rounding. A user who opted out keeps oneDNN and is told the risk; on a machine that shows its
 * caches nothing changes. Each case is a JVM of its own ({@link HiddenCacheChild}): the switch is
 * the process's, and djl-amp decides once per process.
 */
class HiddenCacheCureTest {

    private static final String WARNED = "hides its CPU cache topology";

    private static Run cured;
    private static Run optedOut;
    private static Run visible;

    /** What a child printed, and the weights it wrote: before training, then after. */
    private record Run(String out, float[] before, float[] after) {
        int count(String text) {
            return out.split(java.util.regex.Pattern.quote(text), -1).length - 1;
        }

        /** oneDNN's verbose lines for convolutions it ran. */
        List<String> oneDnnConvolutions() {
            List<String> lines = new ArrayList<>();
            for (String line : out.split("\n")) {
                if (line.startsWith("onednn_verbose") && line.contains(",exec,cpu,convolution,")) {
                    lines.add(line);
                }
            }
            return lines;
        }
    }

    @BeforeAll
    static void runChildren(@TempDir Path dir) throws Exception {
        cured = child(dir, "hidden", "allowed");
        optedOut = child(dir, "hidden", "opted-out");
        visible = child(dir, "visible", "allowed");
    }

    @Test
    void whereCachesAreHiddenConfigureTurnsOneDnnOffAndSaysSoOnce() {
        String out = cured.out();
        assertTrue(out.contains("cure-outcome=APPLIED"), out);
        assertTrue(out.contains("onednn-after-configure=false"), out);
        assertTrue(out.contains("onednn-after-training=false"), out);
        // Amp.configure ran twice: one WARN, saying why, what it costs and how to opt out
        assertEquals(1, cured.count(WARNED), out);
        assertTrue(out.contains("turned libtorch's oneDNN off for this process"), out);
        assertTrue(out.contains("slower"), out);
        assertTrue(out.contains("platformCure(false)"), out);
        // the kept verdicts' key says what runs, and auto does not choose libtorch's own bf16
        assertTrue(out.contains("oneDNN off\n"), out);
        assertTrue(out.contains("auto-on-cpu=FP32"), out);
        // forward and backward ran on libtorch's own kernels: oneDNN reports no convolution
        assertEquals(List.of(), cured.oneDnnConvolutions());
    }

    /**
     * The same five SGD steps on libtorch's own kernels and on oneDNN: the same initial weights
     * (bitwise), and trained weights apart by no more than fp32 rounding. The bound, per parameter:
     * a convolution's reduction of K terms, summed in another order by another kernel, moves by at
     * most K u (u = 2^-24, fp32's unit roundoff; Higham's gamma_K) of its size; the longest here is
     * the stem's weight gradient, K = batch x 16 x 16 = 2048 (forward and input gradients sum at
     * most 144), so each step's update moves by at most 2048 u of its size, taken as the largest
     * change of that parameter over the run; over five steps that adds up to five times as much,
     * plus one rounding of each weight per step (5 u |w|). Seen on this project's 2-core AMD EPYC
     * (family 23): at most 2.5e-7, about 1/100 of the bound.
     */
    @Test
    void trainingWithoutOneDnnMatchesTrainingWithItWithinFp32Rounding() {
        assertArrayEquals(visible.before(), cured.before(), "the same initial weights");
        double u = Math.ulp(1.0f) / 2;
        double gamma = 2048 * u;
        int steps = HiddenCacheChild.STEPS;
        float[] w0 = visible.before();
        float[] on = visible.after();
        float[] off = cured.after();
        double worst = 0;
        double bound = 0;
        int offset = 0;
        for (int size : parameterSizes()) {
            double update = 0;
            double largest = 0;
            double apart = 0;
            for (int i = offset; i < offset + size; i++) {
                update = Math.max(update, Math.abs(on[i] - w0[i]));
                largest = Math.max(largest, Math.abs(on[i]));
                apart = Math.max(apart, Math.abs(on[i] - off[i]));
            }
            double tolerance = steps * gamma * update + steps * u * largest;
            assertTrue(
                    apart <= tolerance,
                    "parameter at " + offset + ": apart " + apart + " > bound " + tolerance);
            worst = Math.max(worst, apart);
            bound = Math.max(bound, tolerance);
            offset += size;
        }
        assertEquals(on.length, offset);
        assertFalse(Arrays.equals(on, off), "other kernels ran: not bitwise oneDNN's");
        System.out.printf(
                "weights without oneDNN against with it: at most %.3g apart, bound %.3g%n",
                worst, bound);
    }

    @Test
    void aUserWhoOptedOutKeepsOneDnnAndIsToldTheRisk() {
        String out = optedOut.out();
        assertTrue(out.contains("cure-outcome=OPTED_OUT"), out);
        assertTrue(out.contains("onednn-after-training=true"), out);
        assertEquals(1, optedOut.count(WARNED), out);
        assertTrue(out.contains("may end it, or compute wrong"), out);
        assertTrue(out.contains("oneDNN on\n"), out);
        assertFalse(optedOut.oneDnnConvolutions().isEmpty(), out);
    }

    @Test
    void whereCachesAreVisibleNothingChanges() {
        String out = visible.out();
        assertTrue(out.contains("cure-outcome=NOT_NEEDED"), out);
        assertTrue(out.contains("onednn-after-training=true"), out);
        assertEquals(0, visible.count(WARNED), out);
        assertTrue(out.contains("oneDNN on\n"), out);
        // oneDNN ran training's convolutions, the backward included
        List<String> convolutions = visible.oneDnnConvolutions();
        assertTrue(convolutions.stream().anyMatch(l -> l.contains("backward_data")), out);
        assertTrue(convolutions.stream().anyMatch(l -> l.contains("backward_weights")), out);
        // the same kernels as the opted-out run's: the same weights, bitwise
        assertArrayEquals(visible.after(), optedOut.after());
    }

    /** The sizes of the child network's parameters, in the order DJL lists them. */
    private static int[] parameterSizes() {
        return new int[] {
            16 * 3 * 9, 16, 8 * 16, 8, 8 * 8 * 9, 8, 16 * 8, 16, 16 * 16, 16, 10 * 16, 10
        };
    }

    private static Run child(Path dir, String topology, String allowed) throws Exception {
        Path weights = dir.resolve(topology + "-" + allowed + ".bin");
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx1g");
        command.add("-Dai.djl.offline=true");
        command.add("-Ddjlamp.verdicts=off");
        command.add("-D" + CacheTopology.TEST_PROPERTY + "=" + topology);
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(HiddenCacheChild.class.getName());
        command.add(weights.toString());
        command.add(allowed);
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        // oneDNN lists every primitive it runs; no cap, no opt-out from the environment
        builder.environment().put("ONEDNN_VERBOSE", "1");
        builder.environment().remove(OneDnnIsa.VARIABLE);
        builder.environment().remove(OneDnnIsa.OLD_VARIABLE);
        Process process = builder.start();
        String output = new String(process.getInputStream().readAllBytes());
        assertEquals(0, process.waitFor(), output);
        float[] values = read(weights);
        int half = values.length / 2;
        return new Run(
                output,
                Arrays.copyOfRange(values, 0, half),
                Arrays.copyOfRange(values, half, values.length));
    }

    private static float[] read(Path file) throws IOException {
        byte[] bytes = Files.readAllBytes(file);
        float[] values = new float[bytes.length / Float.BYTES];
        try (DataInputStream in = new DataInputStream(Files.newInputStream(file))) {
            for (int i = 0; i < values.length; i++) {
                values[i] = in.readFloat();
            }
        }
        return values;
    }
}
