package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Drives PyTorch's {@code _amp_update_scale_} through scripted overflow sequences. */
class ScaleUpdateKernelTest {

    private static final class Trace {
        final float[] scales;
        final int[] trackers;

        Trace(int n) {
            scales = new float[n];
            trackers = new int[n];
        }
    }

    private static Trace runKernel(
            boolean[] overflow, float init, double growth, double backoff, int interval) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            NDArray scale = manager.create(new float[] {init});
            NDArray tracker = manager.zeros(new Shape(1), DataType.INT32);
            Trace trace = new Trace(overflow.length);
            for (int i = 0; i < overflow.length; i++) {
                try (NDManager step = manager.newSubManager()) {
                    NDArray found = step.create(new float[] {overflow[i] ? 1f : 0f});
                    backend.updateScale(scale, tracker, found, growth, backoff, interval);
                }
                trace.scales[i] = scale.getFloat(0);
                trace.trackers[i] = tracker.getInt(0);
            }
            return trace;
        }
    }

    @Test
    void gradScalerDefaultsFollowTheScript() {
        // init 2^16, growth 2 every 3 clean steps (2000 in GradScaler; shortened), backoff 0.5
        boolean[] script = {false, false, false, true, false, true, true, false, false, false};
        float[] expectedScale = {
            65536, 65536, 131072, 65536, 65536, 32768, 16384, 16384, 16384, 32768
        };
        int[] expectedTracker = {1, 2, 0, 0, 1, 0, 0, 1, 2, 0};
        Trace trace = runKernel(script, 65536f, 2.0, 0.5, 3);
        for (int i = 0; i < script.length; i++) {
            assertEquals(expectedScale[i], trace.scales[i], "scale after step " + i);
            assertEquals(expectedTracker[i], trace.trackers[i], "tracker after step " + i);
        }
    }

    @Test
    void growthThatWouldOverflowIsRefused() {
        boolean[] clean = {false, false, false};
        Trace trace = runKernel(clean, 3.0e38f, 2.0, 0.5, 1);
        for (int i = 0; i < clean.length; i++) {
            assertEquals(3.0e38f, trace.scales[i], "scale stays finite at step " + i);
            assertEquals(0, trace.trackers[i], "tracker resets at the interval");
        }
    }

    @Test
    void randomScriptsMatchGradScalersSemantics() {
        Random random = new Random(3);
        boolean[] script = new boolean[300];
        for (int i = 0; i < script.length; i++) {
            script[i] = random.nextInt(9) == 0;
        }
        double growth = 2.0;
        double backoff = 0.25;
        int interval = 7;
        Trace trace = runKernel(script, 1024f, growth, backoff, interval);
        float scale = 1024f;
        int tracker = 0;
        for (int i = 0; i < script.length; i++) {
            if (script[i]) {
                scale = (float) (scale * backoff);
                tracker = 0;
            } else if (tracker + 1 == interval) {
                scale = (float) (scale * growth);
                tracker = 0;
            } else {
                tracker++;
            }
            assertEquals(scale, trace.scales[i], "scale after step " + i);
            assertEquals(tracker, trace.trackers[i], "tracker after step " + i);
        }
    }
}
