package io.github.djlamp.amp.pytorch;

/**
 * MXNet 1.9.1's {@code nag_mom_update} (the kernel {@code NAGMomKernel} of {@code
 * src/operator/optimizer_op-inl.h}) on host floats, transcribed statement by statement and
 * independent of {@link DjlNagRule}: what DJL's {@code Nag} runs on DJL's MXNet engine, its only
 * engine with a Nag update ({@code MxNDArrayEx.nagUpdate} invokes the operator with the weight as
 * its output, so the kernel writes the weight in place).
 */
final class MxnetNagMomUpdate {

    private MxnetNagMomUpdate() {}

    /**
     * One update, in place: {@code weight} (also the operator's output) and {@code mom}.
     *
     * <p>Per element, as the kernel: {@code mom = momentum mom}; {@code out = weight - mom +
     * (momentum + 1) (mom - lr (clip(rescale grad) + wd weight))}; {@code mom = mom - lr
     * (clip(rescale grad) + wd weight)}. The output is the weight, so the third statement reads the
     * weight the second one wrote (as the kernel's multi-precision variant does explicitly).
     */
    static void update(
            float[] weight,
            float[] grad,
            float[] mom,
            float lr,
            float momentum,
            float wd,
            float rescale,
            float clip) {
        for (int i = 0; i < weight.length; i++) {
            float g = rescale * grad[i];
            if (clip >= 0f) {
                g = clip(g, clip);
            }
            mom[i] = momentum * mom[i];
            weight[i] = weight[i] - mom[i] + (momentum + 1) * (mom[i] - lr * (g + wd * weight[i]));
            mom[i] = mom[i] - lr * (g + wd * weight[i]);
        }
    }

    /** mshadow_op::clip: into {@code [-bound, bound]}. */
    private static float clip(float x, float bound) {
        if (x > bound) {
            return bound;
        }
        return x < -bound ? -bound : x;
    }
}
