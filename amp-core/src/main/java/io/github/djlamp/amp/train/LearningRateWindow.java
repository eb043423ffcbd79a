package io.github.djlamp.amp.train;

import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.AmpException;
import java.util.Arrays;

/**
 * DJL's learning rate tracker for fused steps, evaluated on the host a window ahead of the device.
 *
 * <p>DJL's optimizers ask their tracker for the rate of update {@code beginNumUpdate + n}, where
 * {@code n} counts applied steps; a skipped step is not counted. When skips are decided on the
 * device, the host no longer knows {@code n}, only an upper bound: the count read at the last
 * refresh plus the steps launched since. So the host hands the device the rates of a window of
 * counts, and the device picks the one of its own count. When the bound may run past the window,
 * the caller reads the device's count (one host read per {@link #AHEAD} steps at most) and
 * refreshes.
 *
 * <p>Each count is asked of the tracker once, in increasing order, as DJL itself does: trackers
 * with state that only moves forward ({@code MultiFactorTracker}) give DJL's values. A tracker is
 * asked up to {@link #AHEAD} steps before the step that uses its answer.
 */
final class LearningRateWindow {

    /** How many steps ahead of the device's count the host evaluates the tracker. */
    static final int AHEAD = 256;

    private final Tracker tracker;
    private final int beginNumUpdate;
    private final int ahead;
    private float[] rates = new float[0];
    private long first;
    private long launchesSinceRefresh;
    private boolean refreshed;

    LearningRateWindow(Tracker tracker, int beginNumUpdate) {
        this(tracker, beginNumUpdate, AHEAD);
    }

    LearningRateWindow(Tracker tracker, int beginNumUpdate, int ahead) {
        if (ahead < 1) {
            throw new IllegalArgumentException("ahead must be at least 1, got " + ahead);
        }
        this.tracker = tracker;
        this.beginNumUpdate = beginNumUpdate;
        this.ahead = ahead;
    }

    /**
     * Returns whether the next launch may find a count of applied steps past the window: then the
     * caller reads the count and calls {@link #refresh(long)} before launching.
     *
     * @return true before the first launch and whenever the window may be exhausted
     */
    boolean needsRefresh() {
        return !refreshed || launchesSinceRefresh >= rates.length;
    }

    /**
     * Moves the window to start at the device's count of applied steps and evaluates the tracker
     * for every count not asked before, up to {@link #AHEAD} past it.
     *
     * @param appliedSteps the device's count of applied steps, read on the host
     * @return the rates of counts {@code appliedSteps, appliedSteps + 1, ...}
     */
    float[] refresh(long appliedSteps) {
        if (refreshed && (appliedSteps < first || appliedSteps > first + launchesSinceRefresh)) {
            throw new IllegalStateException(
                    "The device counts "
                            + appliedSteps
                            + " applied steps, outside the "
                            + first
                            + ".."
                            + (first + launchesSinceRefresh)
                            + " that the launches since the last refresh allow");
        }
        long evaluatedEnd = refreshed ? first + rates.length : appliedSteps;
        long end = Math.max(evaluatedEnd, appliedSteps + ahead);
        float[] window = new float[Math.toIntExact(end - appliedSteps)];
        int kept = Math.toIntExact(evaluatedEnd - appliedSteps);
        System.arraycopy(rates, rates.length - kept, window, 0, kept);
        for (int i = kept; i < window.length; i++) {
            int count = Math.toIntExact(beginNumUpdate + appliedSteps + i + 1);
            window[i] = tracker.getNewValue(count);
            if (!Float.isFinite(window[i])) {
                throw new AmpException(
                        "The learning rate tracker "
                                + tracker.getClass().getName()
                                + " returned "
                                + window[i]
                                + " for update "
                                + count
                                + ", which would make every weight NaN; fix the tracker (the fused"
                                + " optimizer step asks it up to "
                                + ahead
                                + " updates ahead)");
            }
        }
        rates = window;
        first = appliedSteps;
        launchesSinceRefresh = 0;
        refreshed = true;
        return Arrays.copyOf(window, window.length);
    }

    /** Counts one launch since the last refresh. */
    void launched() {
        launchesSinceRefresh++;
    }

    /**
     * Returns the count of applied steps that the window's first rate is for.
     *
     * @return the count
     */
    long first() {
        return first;
    }
}
