package io.github.djlamp.amp.scale;

/**
 * The host's copy of a loss scale's state, advanced from each step's verdict by the arithmetic the
 * device runs (GradScaler's, plus hysteresis, a minimum and a maximum), so that reports and
 * decisions read no device value. Also counts the steps and a fixed scale's runs of overflows.
 */
final class HostScaleMirror {

    /** Runs the device's scale update with the factors the host arithmetic chose for this step. */
    @FunctionalInterface
    interface ScaleKernel {
        /** The device state is already updated for the step: nothing to run. */
        ScaleKernel NONE = (growthFactor, backoffFactor) -> {};

        /**
         * Updates the device scale: on overflow times {@code backoffFactor}, after a run of clean
         * steps times {@code growthFactor}.
         */
        void run(double growthFactor, double backoffFactor);
    }

    private final LossScaling config;
    private float scale;
    private int growthTracker;
    private int overflowsSinceChange;
    private long steps;
    private long skippedSteps;
    private int overflowRun;
    private int longestOverflowRun;

    HostScaleMirror(LossScaling config) {
        this.config = config;
    }

    /** Starts again from a snapshot; the runs of overflows start from zero. */
    void restore(ScalerState state) {
        scale = state.getScale();
        growthTracker = state.getGrowthTracker();
        overflowsSinceChange = state.getOverflowsSinceChange();
        steps = state.getSteps();
        skippedSteps = state.getSkippedSteps();
        overflowRun = 0;
        longestOverflowRun = 0;
    }

    /** Takes the values a host read of the device state found; steps are counted on the host. */
    void load(DeviceScalerState.Reading reading) {
        scale = reading.scale();
        growthTracker = reading.growthTracker();
        overflowsSinceChange = reading.overflowsSinceChange();
        skippedSteps = reading.skippedSteps();
        overflowRun = reading.overflowRun();
        longestOverflowRun = Math.max(longestOverflowRun, reading.longestOverflowRun());
    }

    ScalerState state() {
        return new ScalerState(scale, growthTracker, overflowsSinceChange, steps, skippedSteps);
    }

    float getScale() {
        return scale;
    }

    int getGrowthTracker() {
        return growthTracker;
    }

    long getSteps() {
        return steps;
    }

    long getSkippedSteps() {
        return skippedSteps;
    }

    /** Takes back the steps counted since the count was {@code steps}: a step abandoned. */
    void rewindSteps(long steps) {
        this.steps = steps;
    }

    /** Counts a step first, so that a step that throws (a collapse) still counts as taken. */
    void countStep() {
        steps++;
    }

    /**
     * Advances the state by one step's verdict: a dynamic scale moves (running {@code kernel} with
     * the factors chosen), a fixed one counts its skip; then the run of overflows is counted.
     *
     * @param overflow whether the step's gradients held Inf or NaN
     * @param collapse the collapse predicted for this overflow, or null
     * @param kernel the device update, or {@link ScaleKernel#NONE}
     * @throws LossScaleCollapsedException {@code collapse}, when the overflow would back off
     */
    void advance(boolean overflow, LossScaleCollapsedException collapse, ScaleKernel kernel) {
        if (config.getMode() == LossScaling.Mode.DYNAMIC) {
            advanceDynamic(overflow, collapse, kernel);
        } else if (overflow) {
            skippedSteps++;
        }
        overflowRun = overflow ? overflowRun + 1 : 0;
        longestOverflowRun = Math.max(longestOverflowRun, overflowRun);
    }

    private void advanceDynamic(
            boolean overflow, LossScaleCollapsedException collapse, ScaleKernel kernel) {
        if (overflow) {
            skippedSteps++;
            overflowsSinceChange++;
            if (overflowsSinceChange < config.getHysteresis()) {
                // tolerated: the tracker resets, the scale stays
                kernel.run(config.getGrowthFactor(), 1.0);
                growthTracker = 0;
                return;
            }
            if (collapse != null) {
                throw collapse;
            }
            float backedOff = (float) (scale * config.getBackoffFactor());
            kernel.run(config.getGrowthFactor(), config.getBackoffFactor());
            scale = backedOff;
            growthTracker = 0;
            overflowsSinceChange = 0;
            return;
        }
        double growth = config.getGrowthFactor();
        boolean grows = growthTracker + 1 == config.getGrowthInterval();
        if (grows && scale * growth > config.getMaxScale()) {
            growth = config.getMaxScale() / (double) scale;
        }
        kernel.run(growth, config.getBackoffFactor());
        if (grows) {
            float grown = (float) (scale * growth);
            if (Float.isFinite(grown)) {
                if (grown != scale) {
                    overflowsSinceChange = 0;
                }
                scale = grown;
            }
            growthTracker = 0;
        } else {
            growthTracker++;
        }
    }

    /** Whether backing off now would take a dynamic scale below its minimum. */
    boolean backoffWouldCollapse() {
        return config.getMode() == LossScaling.Mode.DYNAMIC
                && overflowsSinceChange + 1 >= config.getHysteresis()
                && (float) (scale * config.getBackoffFactor()) < config.getMinScale();
    }

    /** The longest run of overflowing steps since the last call; counting starts again. */
    int takeLongestOverflowRun() {
        int run = longestOverflowRun;
        longestOverflowRun = 0;
        return run;
    }

    void resetOverflowRun() {
        overflowRun = 0;
        longestOverflowRun = 0;
    }
}
