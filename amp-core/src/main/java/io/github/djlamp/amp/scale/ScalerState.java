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
    private final LossScaling.Mode mode;
    private final float initScale;

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
        this.mode = null;
        this.initScale = Float.NaN;
    }

    private ScalerState(ScalerState state, LossScaling.Mode mode, float initScale) {
        this.scale = state.scale;
        this.growthTracker = state.growthTracker;
        this.overflowsSinceChange = state.overflowsSinceChange;
        this.steps = state.steps;
        this.skippedSteps = state.skippedSteps;
        this.mode = mode;
        this.initScale = initScale;
    }

    /**
     * Returns this state stamped with the configuration it was reached under, so that a later
     * trainer restores it only under the same configuration.
     *
     * @param config the loss scaling the state was reached under
     * @return the stamped state
     */
    public ScalerState withOrigin(LossScaling config) {
        return new ScalerState(this, config.getMode(), config.getInitScale());
    }

    /**
     * Returns why this state must not be restored under {@code config}, or null when it belongs
     * there: same mode, same initial scale, and a scale within the configured bounds. A state saved
     * before states were stamped is restored only under dynamic scaling, within the bounds.
     *
     * @param config the loss scaling of the trainer about to restore it
     * @return the reason to ignore the state, or null to restore it
     */
    public String mismatch(LossScaling config) {
        if (!config.isEnabled()) {
            return "loss scaling is off";
        }
        LossScaling.Mode savedMode = mode == null ? LossScaling.Mode.DYNAMIC : mode;
        if (savedMode != config.getMode()) {
            return "it was saved under " + savedMode + " scaling, this trainer uses " + config;
        }
        if (mode != null && Float.compare(initScale, config.getInitScale()) != 0) {
            return "it was saved under initScale "
                    + initScale
                    + ", this trainer is configured with "
                    + config
                    + " (the explicit setting wins)";
        }
        if (!(scale >= config.getMinScale() && scale <= config.getMaxScale())) {
            return "its scale "
                    + scale
                    + " lies outside the configured ["
                    + config.getMinScale()
                    + ", "
                    + config.getMaxScale()
                    + "]";
        }
        return null;
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
        String origin =
                mode == null
                        ? ""
                        : String.format(
                                Locale.ROOT, ";mode=%s;init=%s", mode, Float.toString(initScale));
        return String.format(
                Locale.ROOT,
                "scale=%s;tracker=%d;overflows=%d;steps=%d;skipped=%d%s",
                Float.toString(scale),
                growthTracker,
                overflowsSinceChange,
                steps,
                skippedSteps,
                origin);
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
            if (parts.length != 5 && parts.length != 7) {
                throw new IllegalArgumentException("expected 5 or 7 fields");
            }
            ScalerState state =
                    new ScalerState(
                            Float.parseFloat(value(parts[0], "scale")),
                            Integer.parseInt(value(parts[1], "tracker")),
                            Integer.parseInt(value(parts[2], "overflows")),
                            Long.parseLong(value(parts[3], "steps")),
                            Long.parseLong(value(parts[4], "skipped")));
            if (parts.length == 5) {
                return state;
            }
            return new ScalerState(
                    state,
                    LossScaling.Mode.valueOf(value(parts[5], "mode")),
                    Float.parseFloat(value(parts[6], "init")));
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(
                    "Not a loss scaler state: '"
                            + text
                            + "' (expected scale=F;tracker=N;overflows=N;steps=N;skipped=N[;mode=M;init=F])",
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
                && skippedSteps == that.skippedSteps
                && mode == that.mode
                && Float.compare(initScale, that.initScale) == 0;
    }

    /** {@inheritDoc} */
    @Override
    public int hashCode() {
        return Objects.hash(
                scale, growthTracker, overflowsSinceChange, steps, skippedSteps, mode, initScale);
    }
}
