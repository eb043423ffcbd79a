package io.github.djlamp.amp.reliability;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.nn.Parameter;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.it.ForkedJvm;
import io.github.djlamp.amp.scale.ScalerState;
import io.github.djlamp.amp.train.AmpSession;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Training N steps straight equals training k steps, saving, loading into a fresh JVM and training
 * N-k more: the same weights, bitwise, and the same scaler state; with DJL's per-parameter update
 * (the scaler read on the host each step) and with fused steps (the scaler's state on the device,
 * read only every so many steps: what a GPU gets by default).
 */
class FreshJvmResumeTest {

    /**
     * Bitwise continuation needs kernels that compute alike in every run: on a CPU without native
     * fp16 the emulated 16-bit kernels, split over two threads, round differently now and then
     * (seen here: the resumed run's growth tracker one step off, twice in four CI runs). One
     * intra-op thread makes each run repeat exactly.
     */
    private static final List<String> ONE_THREAD =
            List.of("-Xmx1g", "-Dai.djl.pytorch.num_threads=1");

    private static String state(String output) {
        for (String line : output.split("\n")) {
            if (line.startsWith("STATE ")) {
                return line.substring(6).trim();
            }
        }
        throw new AssertionError("no state in:\n" + output);
    }

    private static List<float[]> weights(Path dir) throws Exception {
        try (Model model = Model.newInstance("resume", "PyTorch")) {
            model.setBlock(Amp.wrap(ResumeScenario.block(), "mixed_float16"));
            model.load(dir, "resume");
            assertTrue(model.getProperty(AmpSession.SCALER_STATE_PROPERTY) != null);
            List<float[]> result = new ArrayList<>();
            for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
                result.add(p.getValue().getArray().toFloatArray());
            }
            return result;
        }
    }

    @ParameterizedTest
    @EnumSource(
            value = FusedOptimizer.class,
            names = {"OFF", "ON"})
    void resumingInAFreshJvmContinuesExactly(
            FusedOptimizer fused, @TempDir Path straight, @TempDir Path resumed) throws Exception {
        String straightState =
                state(
                        ForkedJvm.runOk(
                                ONE_THREAD,
                                ResumeScenario.class,
                                straight.toString(),
                                "0",
                                "40",
                                fused.name()));
        String firstHalf =
                state(
                        ForkedJvm.runOk(
                                ONE_THREAD,
                                ResumeScenario.class,
                                resumed.toString(),
                                "0",
                                "15",
                                fused.name()));
        String resumedState =
                state(
                        ForkedJvm.runOk(
                                ONE_THREAD,
                                ResumeScenario.class,
                                resumed.toString(),
                                "15",
                                "40",
                                fused.name()));
        assertEquals(straightState, resumedState, "scaler state");
        assertTrue(!firstHalf.equals(resumedState), "the second half moved the state");
        // the two poisoned batches, plus fp16's own overflows while the scale settles
        assertTrue(ScalerState.parse(straightState).getSkippedSteps() >= 2, straightState);
        List<float[]> a = weights(straight);
        List<float[]> b = weights(resumed);
        assertEquals(a.size(), b.size());
        for (int i = 0; i < a.size(); i++) {
            assertArrayEquals(a.get(i), b.get(i), "parameter " + i + " bitwise");
        }
    }
}
