package io.github.djlamp.amp.scale;

/**
 * The rules every {@link LossScaling} setting must meet, each checked as it is set: a violation
 * throws {@link IllegalArgumentException} naming the setting, the value, what is allowed and the
 * default.
 */
final class LossScalingChecks {

    private LossScalingChecks() {}

    /** A scale within [2^-24, 2^40]; {@code hint} names the setting's default. */
    static float scale(String setting, float scale, String hint) {
        if (!(scale >= LossScaling.MIN_ALLOWED_SCALE && scale <= LossScaling.MAX_ALLOWED_SCALE)) {
            throw new IllegalArgumentException(
                    setting
                            + " must lie within [2^-24, 2^40] = ["
                            + LossScaling.MIN_ALLOWED_SCALE
                            + ", "
                            + LossScaling.MAX_ALLOWED_SCALE
                            + "], got "
                            + scale
                            + " (below, every scaled gradient underflows to zero; above,"
                            + " every step overflows and is skipped); "
                            + hint);
        }
        return scale;
    }

    static double growthFactor(double factor) {
        if (!(factor > 1) || Double.isInfinite(factor)) {
            throw new IllegalArgumentException(
                    "growthFactor must be finite and > 1, got "
                            + factor
                            + "; GradScaler's default is 2.0");
        }
        return factor;
    }

    static double backoffFactor(double factor) {
        if (!(factor > 0 && factor < 1)) {
            throw new IllegalArgumentException(
                    "backoffFactor must be in (0, 1), got "
                            + factor
                            + "; GradScaler's default is 0.5");
        }
        return factor;
    }

    static int growthInterval(int steps) {
        if (steps <= 0) {
            throw new IllegalArgumentException(
                    "growthInterval must be >= 1 step, got "
                            + steps
                            + "; GradScaler's default is 2000");
        }
        return steps;
    }

    static int hysteresis(int overflows) {
        if (overflows < 1) {
            throw new IllegalArgumentException(
                    "hysteresis must be >= 1 overflow, got "
                            + overflows
                            + "; 1 backs off on every overflow as GradScaler does");
        }
        return overflows;
    }

    /** The minimum at most the maximum, and the initial scale between them. */
    static void bounds(float initScale, float minScale, float maxScale) {
        if (minScale > maxScale) {
            throw new IllegalArgumentException(
                    "minScale ("
                            + minScale
                            + ") must not exceed maxScale ("
                            + maxScale
                            + "); lower minScale or raise maxScale");
        }
        if (initScale < minScale || initScale > maxScale) {
            throw new IllegalArgumentException(
                    "initScale ("
                            + initScale
                            + ") must lie within [minScale, maxScale] = ["
                            + minScale
                            + ", "
                            + maxScale
                            + "]");
        }
    }
}
