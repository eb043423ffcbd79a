package io.github.djlamp.amp.diagnostics;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** What to change in a misaligned 16-bit layer, in words. */
final class Suggestions {

    /** Below this share of the 16-bit FLOPs, an output layer's odd width is not worth padding. */
    static final double NEGLIGIBLE_SHARE = 0.05;

    private Suggestions() {}

    /**
     * Returns the suggestion for one layer, or {@code ""} when nothing needs to change.
     *
     * @param g the layer's GEMM
     * @param readsModelInput whether the layer's input is the model's input, which the user can
     *     only pad, not reshape through the previous layer
     * @param outputLayer whether the layer is the last 16-bit layer, whose width the task sets
     * @param flopShare the layer's share of the model's 16-bit FLOPs
     */
    static String of(LayerGemm g, boolean readsModelInput, boolean outputLayer, double flopShare) {
        return switch (g.kind) {
            case LINEAR -> String.join("; ", linear(g, readsModelInput, outputLayer, flopShare));
            case CONVOLUTION ->
                    String.join("; ", convolution(g, readsModelInput, outputLayer, flopShare));
            case UNKNOWN ->
                    "not a Linear or convolution: the report cannot tell its matrix dimensions;"
                            + " check them by hand";
        };
    }

    private static List<String> linear(
            LayerGemm g, boolean readsModelInput, boolean outputLayer, double flopShare) {
        List<String> out = new ArrayList<>();
        GemmShape s = g.gemm;
        if (!s.isMAligned()) {
            out.add(
                    g.inputRank <= 2
                            ? "batch size " + Alignment.roundUpChoices(s.getM())
                            : "rows (product of the input's leading dimensions, e.g. batch x"
                                    + " sequence) "
                                    + Alignment.roundUpChoices(s.getM())
                                    + ": choose the batch size or sequence length so that the"
                                    + " product is a multiple of 8");
        }
        if (!s.isKAligned()) {
            out.add(
                    readsModelInput
                            ? "pad in features "
                                    + upTo(s.getK())
                                    + " with zero features in the input"
                                    + leaveIfSmall(flopShare)
                            : "in features "
                                    + upTo(s.getK())
                                    + ": round the width of the layer before it up to a multiple"
                                    + " of 8");
        }
        if (!s.isNAligned()) {
            out.add(
                    outputLayer
                            ? outputWidth("units", s.getN(), flopShare)
                            : "round units " + upTo(s.getN()));
        }
        return out;
    }

    private static List<String> convolution(
            LayerGemm g, boolean readsModelInput, boolean outputLayer, double flopShare) {
        List<String> out = new ArrayList<>();
        if (g.groups > 1 && g.inChannelsPerGroup() == 1) {
            if (!g.inChannelsAligned() || !g.outChannelsAligned()) {
                out.add(
                        "depthwise convolution (one input channel per group): memory-bound,"
                                + " Tensor Cores barely help it; nothing to align");
            }
            return out;
        }
        if (!g.inChannelsAligned()) {
            if (g.groups > 1) {
                out.add(
                        "in-channels per group "
                                + g.inChannels
                                + "/"
                                + g.groups
                                + " = "
                                + upTo(g.inChannelsPerGroup())
                                + ": choose groups or channels so that in-channels / groups is a"
                                + " multiple of 8");
            } else if (readsModelInput) {
                out.add(
                        "pad in-channels "
                                + upTo(g.inChannels)
                                + " with zero channels in the input (cuDNN pads small channel"
                                + " counts itself, at a cost)"
                                + leaveIfSmall(flopShare));
            } else {
                out.add(
                        "in-channels "
                                + upTo(g.inChannels)
                                + ": round the filters of the layer before it up to a multiple of"
                                + " 8");
            }
        }
        if (!g.outChannelsAligned()) {
            if (g.groups > 1) {
                out.add(
                        "filters per group "
                                + g.outChannels
                                + "/"
                                + g.groups
                                + " = "
                                + upTo(g.outChannelsPerGroup())
                                + ": choose groups or filters so that filters / groups is a"
                                + " multiple of 8");
            } else if (outputLayer) {
                out.add(outputWidth("filters", g.outChannels, flopShare));
            } else {
                out.add("round filters " + upTo(g.outChannels));
            }
        }
        return out;
    }

    private static String outputWidth(String what, long width, double flopShare) {
        String share = percent(flopShare) + " of the 16-bit FLOPs";
        if (flopShare < NEGLIGIBLE_SHARE) {
            return "output layer: "
                    + width
                    + " "
                    + what
                    + " are set by the task and fine, its cost is negligible ("
                    + share
                    + ")";
        }
        return "output layer: "
                + width
                + " "
                + what
                + " are set by the task but cost "
                + share
                + ": pad "
                + upTo(width)
                + " and ignore the extra outputs";
    }

    /** For input padding: a note that a layer this cheap may be left as it is. */
    private static String leaveIfSmall(double flopShare) {
        return flopShare < NEGLIGIBLE_SHARE
                ? "; at " + percent(flopShare) + " of the 16-bit FLOPs, leaving it is fine"
                : "";
    }

    private static String upTo(long value) {
        return value + " -> " + Alignment.roundUp(value);
    }

    static String percent(double fraction) {
        if (fraction > 0 && fraction < 0.001) {
            return "<0.1%";
        }
        return String.format(Locale.ROOT, "%.1f%%", fraction * 100);
    }
}
