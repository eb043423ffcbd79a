package io.github.djlamp.amp.train;

import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.exception.AmpException;
import java.util.Arrays;

/**
 * DJL's learning rate tracker for fused steps, evaluated on the host a window ahead of the device.
 *
 * <p>DJL's optimizers ask their tracker for the rate of their update count ({@link
 * io.github.djlamp.amp.spi.UpdateCounter}), which a skipped step does not advance. When skips are
 * decided on the device, the host no longer knows the count, only bounds: a launch's count is at
 * least the count read at the last refresh and at most that plus one per launch since. So the host
 * hands the device the rates of a window of counts, and the device picks the one of its own count.
 * When the bound may run past the window, the caller reads the device's count (one host read per
 * {@link #AHEAD} steps at most) and refreshes.
 *
 * <p>Each count is asked of the tracker once, in increasing order, as DJL itself does: trackers
 * with state that only moves forward ({@code MultiFactorTracker}) give DJL's values. A tracker is
 * asked up to {@link #AHEAD} steps before the step that uses its answer, and never for a count
 * below DJL's first, {@code beginNumUpdate + 1}. A tracker that throws or returns a rate that is
 * not finite for a count past the next launch's (a lookup table sized for the run, a range test
 * that grows past the float range) ends the window there: the run fails only if it reaches that
 * count, with an exception naming the tracker.
 */
final class LearningRateWindow {

    /** How many updates ahead of the device's count the host evaluates the tracker. */
    static final int AHEAD = 256;

    private final Tracker tracker;
    private final long lowest;
    private final int ahead;
    private float[] rates = new float[0];
    private long first;
    private long countAtRefresh;
    private long launchesSinceRefresh;
    private boolean refreshed;

    LearningRateWindow(Tracker tracker, int beginNumUpdate) {
        this(tracker, beginNumUpdate, AHEAD);
    }

    LearningRateWindow(Tracker tracker, int beginNumUpdate, int ahead) {
        if (ahead < 2) {
            throw new IllegalArgumentException("ahead must be at least 2, got " + ahead);
        }
        this.tracker = tracker;
        this.lowest = beginNumUpdate + 1L;
        this.ahead = ahead;
    }

    /**
     * Returns whether the next launch's count may lie past the window: then the caller reads the
     * device's count and calls {@link #refresh(long)} before launching.
     *
     * @return true before the first launch and whenever the window may be exhausted
     */
    boolean needsRefresh() {
        return !refreshed || countAtRefresh + launchesSinceRefresh + 1 >= first + rates.length;
    }

    /**
     * Moves the window to start at the device's count (or DJL's first count, if higher) and
     * evaluates the tracker for every count not asked before, up to {@link #AHEAD} past it.
     *
     * @param count the device's update count, read on the host
     * @return the rates of counts {@link #first()}, {@code first() + 1}, ...
     */
    float[] refresh(long count) {
        if (refreshed
                && (count < countAtRefresh || count > countAtRefresh + launchesSinceRefresh)) {
            throw new IllegalStateException(
                    "The device's update count is "
                            + count
                            + ", outside the "
                            + countAtRefresh
                            + ".."
                            + (countAtRefresh + launchesSinceRefresh)
                            + " that the launches since the last refresh allow");
        }
        long start = Math.max(count, lowest);
        long evaluatedEnd = refreshed ? first + rates.length : start;
        long end = Math.max(evaluatedEnd, start + ahead);
        float[] window = new float[Math.toIntExact(end - start)];
        int kept = Math.toIntExact(evaluatedEnd - start);
        System.arraycopy(rates, rates.length - kept, window, 0, kept);
        // the next launch uses a count up to count + 1: those rates are needed now; later ones
        // only if the run gets there, so a tracker that fails past the run's end shortens the
        // window instead of failing the run
        long needed = count + 2 - start;
        for (int i = kept; i < window.length; i++) {
            int updateCount = Math.toIntExact(start + i);
            String failure;
            try {
                window[i] = tracker.getNewValue(updateCount);
                failure = Float.isFinite(window[i]) ? null : "returned " + window[i];
            } catch (RuntimeException e) {
                failure = "threw " + e;
            }
            if (failure == null) {
                continue;
            }
            if (i >= needed) {
                window = Arrays.copyOf(window, i);
                break;
            }
            throw new AmpException(
                    "The learning rate tracker "
                            + tracker
                            + " ("
                            + tracker.getClass().getName()
                            + ") "
                            + failure
                            + " for update "
                            + updateCount
                            + ", the update the next fused optimizer step applies; a NaN or"
                            + " infinite rate would make every weight NaN. Fix the tracker for"
                            + " this update, or end training before it");
        }
        rates = window;
        first = start;
        countAtRefresh = count;
        launchesSinceRefresh = 0;
        refreshed = true;
        return Arrays.copyOf(window, window.length);
    }

    /** Counts one launch since the last refresh. */
    void launched() {
        launchesSinceRefresh++;
    }

    /**
     * Returns the update count that the window's first rate is for.
     *
     * @return the count
     */
    long first() {
        return first;
    }
}
