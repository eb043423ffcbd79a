package io.github.djlamp.amp.scale;

import java.util.Locale;
import java.util.Objects;

/**
 * A snapshot of a {@link LossScaler}'s state, for checkpoints: saved with the model and restored so
 * that resumed training continues with the same scale and growth tracker.
 */
public final class ScalerState {

    private final float scale;
    private final int growthTracker;
    private final int overflowsSinceChange;
    private final long steps;
    private final long skippedSteps;

    /**
     * Creates a snapshot.
     *
     * @param scale the loss scale
     * @param growthTracker clean steps since the last growth or overflow
     * @param overflowsSinceChange overflows since the scale last changed (hysteresis)
     * @param steps steps taken, skipped ones included
     * @param skippedSteps steps skipped for non-finite gradients
     */
    public ScalerState(
            float scale,
            int growthTracker,
            int overflowsSinceChange,
            long steps,
            long skippedSteps) {
        this.scale = scale;
        this.growthTracker = growthTracker;
        this.overflowsSinceChange = overflowsSinceChange;
        this.steps = steps;
        this.skippedSteps = skippedSteps;
    }

    /**
     * Returns the loss scale.
     *
     * @return the scale
     */
    public float getScale() {
        return scale;
    }

    /**
     * Returns the clean steps counted towards the next growth.
     *
     * @return the growth tracker
     */
    public int getGrowthTracker() {
        return growthTracker;
    }

    /**
     * Returns the overflows counted towards the next backoff (hysteresis).
     *
     * @return overflows since the scale last changed
     */
    public int getOverflowsSinceChange() {
        return overflowsSinceChange;
    }

    /**
     * Returns the number of steps taken, skipped ones included.
     *
     * @return steps
     */
    public long getSteps() {
        return steps;
    }

    /**
     * Returns the number of skipped steps.
     *
     * @return skipped steps
     */
    public long getSkippedSteps() {
        return skippedSteps;
    }

    /**
     * Returns the compact form read by {@link #parse(String)}, e.g. {@code
     * scale=65536.0;tracker=12;overflows=0;steps=40;skipped=1}.
     *
     * @return the string form
     */
    @Override
    public String toString() {
        return String.format(
                Locale.ROOT,
                "scale=%s;tracker=%d;overflows=%d;steps=%d;skipped=%d",
                Float.toString(scale),
                growthTracker,
                overflowsSinceChange,
                steps,
                skippedSteps);
    }

    /**
     * Parses the form written by {@link #toString()}.
     *
     * @param text the string form
     * @return the state
     * @throws IllegalArgumentException when the text is not a scaler state
     */
    public static ScalerState parse(String text) {
        try {
            String[] parts = text.split(";");
            if (parts.length != 5) {
                throw new IllegalArgumentException("expected 5 fields");
            }
            return new ScalerState(
                    Float.parseFloat(value(parts[0], "scale")),
                    Integer.parseInt(value(parts[1], "tracker")),
                    Integer.parseInt(value(parts[2], "overflows")),
                    Long.parseLong(value(parts[3], "steps")),
                    Long.parseLong(value(parts[4], "skipped")));
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(
                    "Not a loss scaler state: '"
                            + text
                            + "' (expected scale=F;tracker=N;overflows=N;steps=N;skipped=N)",
                    e);
        }
    }

    private static String value(String part, String key) {
        if (!part.startsWith(key + "=")) {
            throw new IllegalArgumentException("expected " + key);
        }
        return part.substring(key.length() + 1);
    }

    /** {@inheritDoc} */
    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof ScalerState)) {
            return false;
        }
        ScalerState that = (ScalerState) o;
        return Float.compare(scale, that.scale) == 0
                && growthTracker == that.growthTracker
                && overflowsSinceChange == that.overflowsSinceChange
                && steps == that.steps
                && skippedSteps == that.skippedSteps;
    }

    /** {@inheritDoc} */
    @Override
    public int hashCode() {
        return Objects.hash(scale, growthTracker, overflowsSinceChange, steps, skippedSteps);
    }
}
