package io.github.djlamp.amp.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.exception.AmpException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The host's side of a learning rate schedule on the fused path: the rates handed to the device are
 * DJL's for the device's update count, whatever the skips, and the tracker is asked each count
 * once, in order.
 */
class LearningRateWindowTest {

    private static final int AHEAD = 4;

    /** A tracker that records the counts it is asked for. */
    private static final class Recording implements Tracker {
        final List<Integer> asked = new ArrayList<>();

        @Override
        public float getNewValue(int numUpdate) {
            asked.add(numUpdate);
            return numUpdate * 0.5f;
        }
    }

    @Test
    void theFirstWindowHoldsDjlsRatesFromTheBeginOffset() {
        Recording tracker = new Recording();
        LearningRateWindow window = new LearningRateWindow(tracker, 10, AHEAD);
        assertTrue(window.needsRefresh(), "nothing on the device before the first launch");
        assertArrayEquals(new float[] {5.5f, 6f, 6.5f, 7f}, window.refresh(0));
        assertEquals(11, window.first(), "DJL's first update is beginNumUpdate + 1");
    }

    @Test
    void aRefreshIsNeededOnlyWhenTheCountMayRunPastTheWindow() {
        LearningRateWindow window = new LearningRateWindow(new Recording(), 0, AHEAD);
        window.refresh(0);
        for (int i = 0; i < AHEAD; i++) {
            assertFalse(window.needsRefresh(), "launch " + i + " fits");
            window.launched();
        }
        assertTrue(window.needsRefresh(), "a fifth launch may reach count 5, past the window");
    }

    @Test
    void afterSkipsTheWindowStartsAtTheDevicesCountAndAsksEachCountOnceInOrder() {
        Recording tracker = new Recording();
        LearningRateWindow window = new LearningRateWindow(tracker, 0, AHEAD);
        window.refresh(0);
        for (int i = 0; i < AHEAD; i++) {
            window.launched();
        }
        // two of the four launches were skipped on the device: its count is 2, and the next
        // update's count is 2 or 3 (2 when the parameters it trains are behind the count)
        float[] rates = window.refresh(2);
        assertEquals(2, window.first());
        assertArrayEquals(new float[] {1f, 1.5f, 2f, 2.5f}, rates);
        assertEquals(List.of(1, 2, 3, 4, 5), tracker.asked, "counts 2 to 4 kept, not asked again");
    }

    @Test
    void aTrackerWithForwardOnlyStateGivesDjlsRates() {
        // MultiFactorTracker moves its state forward as it is asked: asked ahead and then for an
        // earlier count, it would answer with the later value
        Tracker fused = halvedAfterUpdates2And3();
        Tracker djl = halvedAfterUpdates2And3();
        LearningRateWindow window = new LearningRateWindow(fused, 0, AHEAD);
        boolean[] skipped = {false, true, true, false, false, true, false, false, false, false};
        long count = 0;
        float[] rates = null;
        for (boolean skip : skipped) {
            if (window.needsRefresh()) {
                rates = window.refresh(count);
            }
            window.launched();
            if (!skip) {
                count++;
                float used = rates[(int) (count - window.first())];
                assertEquals(djl.getNewValue((int) count), used, "count " + count);
            }
        }
    }

    private static Tracker halvedAfterUpdates2And3() {
        return Tracker.multiFactor()
                .setSteps(new int[] {2, 3})
                .optFactor(0.5f)
                .setBaseValue(1f)
                .build();
    }

    @Test
    void aRateThatIsNotANumberIsRefusedWithItsUpdateWhenTheRunReachesIt() {
        LearningRateWindow window =
                new LearningRateWindow(n -> n == 3 ? Float.NaN : 0.1f, 0, AHEAD);
        assertEquals(2, window.refresh(0).length, "updates 1 and 2 are usable");
        window.launched();
        window.launched();
        assertTrue(window.needsRefresh());
        AmpException e = assertThrows(AmpException.class, () -> window.refresh(2));
        assertTrue(e.getMessage().contains("returned NaN for update 3"), e.getMessage());
    }

    @Test
    void aCountTheLaunchesCannotExplainIsRefused() {
        LearningRateWindow window = new LearningRateWindow(new Recording(), 0, AHEAD);
        window.refresh(0);
        window.launched();
        IllegalStateException e =
                assertThrows(IllegalStateException.class, () -> window.refresh(2));
        assertTrue(e.getMessage().contains("update count is 2"), e.getMessage());
    }

    @Test
    void aTrackerSizedForTheRunShortensTheWindowInsteadOfFailing() {
        float[] table = {0.1f, 0.2f, 0.3f};
        Tracker lookup = count -> table[count - 1]; // counts 1..3 only
        LearningRateWindow window = new LearningRateWindow(lookup, 0, AHEAD);
        assertArrayEquals(table, window.refresh(0));
        window.launched();
        window.launched();
        assertFalse(window.needsRefresh(), "update 3 is in the table");
        window.launched();
        assertTrue(window.needsRefresh(), "the window ends where the table does");
    }

    @Test
    void aRateThatGrowsPastTheFloatRangeLaterDoesNotFailTheRunNow() {
        Tracker rangeTest = count -> (float) Math.pow(1e20, count);
        LearningRateWindow window = new LearningRateWindow(rangeTest, 0, AHEAD);
        assertEquals(1, window.refresh(0).length, "1e20 fits a float, 1e40 does not");
    }

    @Test
    void aTrackerThatFailsForTheNextUpdateIsNamed() {
        Tracker broken =
                new Tracker() {
                    @Override
                    public float getNewValue(int numUpdate) {
                        throw new ArrayIndexOutOfBoundsException(numUpdate);
                    }

                    @Override
                    public String toString() {
                        return "MyTable";
                    }
                };
        LearningRateWindow window = new LearningRateWindow(broken, 0, AHEAD);
        AmpException e = assertThrows(AmpException.class, () -> window.refresh(0));
        assertTrue(
                e.getMessage().startsWith("The learning rate tracker MyTable ("), e.getMessage());
        assertTrue(e.getMessage().contains("for update 1, the update the next"), e.getMessage());
    }
}
