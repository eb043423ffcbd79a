package io.github.djlamp.amp.policy;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Properties;

/**
 * Which parts of a wrapped model are checkpointed: in a training forward pass a checkpointed
 * segment runs without recording autograd's graph and keeps only its inputs; after the loss's
 * backward djl-amp runs it again with recording on, from the last segment to the first, and
 * back-propagates the gradient that reached its output through it. Memory for compute: the
 * activations inside a segment are alive only while it is recomputed (Chen et al. 2016, "Training
 * Deep Nets with Sublinear Memory Cost"; PyTorch's {@code torch.utils.checkpoint}).
 *
 * <p>Segments are stages of the model's chain of {@code SequentialBlock}s: the children of the
 * wrapped block when it is a {@code SequentialBlock}, and, chosen by class or path, blocks reached
 * from it through {@code SequentialBlock}s only. Inside a {@code ParallelBlock} (a residual unit's
 * branches) the input of a segment is also read by the other branches, whose backward would free
 * the graph the segment's gradient has to flow through, so a segment is never placed there; a whole
 * residual unit is one stage and may be a segment.
 *
 * <p>The text form (for {@link #parse} and the {@value #PROPERTY} property): {@code none}, {@code
 * stages}, {@code every:N}, {@code auto}, or a comma-separated list of {@code class:NAME} (a
 * class's full or simple name) and {@code path:PATH} ({@link BlockPaths}) selectors.
 */
public final class Checkpointing {

    /** The key of {@link #fromProperties}, as in a configuration file. */
    public static final String PROPERTY = "checkpointing";

    /** How the segments are chosen. */
    public enum Mode {
        /** Nothing is checkpointed. */
        NONE,
        /** Every stage of the wrapped {@code SequentialBlock} is a segment. */
        STAGES,
        /** Every {@code n} consecutive stages are a segment. */
        EVERY,
        /** About the square root of the number of stages in a segment (Chen et al.'s rule). */
        AUTO,
        /** The blocks the selectors name, each a segment. */
        BLOCKS
    }

    private static final Checkpointing NONE = new Checkpointing(Mode.NONE, 0, List.of());

    private final Mode mode;
    private final int stagesPerSegment;
    private final List<String> selectors;

    private Checkpointing(Mode mode, int stagesPerSegment, List<String> selectors) {
        this.mode = mode;
        this.stagesPerSegment = stagesPerSegment;
        this.selectors = selectors;
    }

    /**
     * Returns the setting that checkpoints nothing: the default.
     *
     * @return no checkpointing
     */
    public static Checkpointing none() {
        return NONE;
    }

    /**
     * Returns the setting that makes every stage of the wrapped {@code SequentialBlock} a segment.
     *
     * @return stage checkpointing
     */
    public static Checkpointing stages() {
        return new Checkpointing(Mode.STAGES, 1, List.of());
    }

    /**
     * Returns the setting that makes every {@code n} consecutive stages a segment (the last may be
     * shorter).
     *
     * @param n stages in a segment, at least 1
     * @return the setting
     * @throws IllegalArgumentException when {@code n} is below 1
     */
    public static Checkpointing every(int n) {
        if (n < 1) {
            throw new IllegalArgumentException(
                    "Checkpointing.every(n) needs n >= 1 stages in a segment, got "
                            + n
                            + "; Checkpointing.stages() makes every stage a segment");
        }
        return new Checkpointing(Mode.EVERY, n, List.of());
    }

    /**
     * Returns the setting that makes segments of about the square root of the number of stages, so
     * that the inputs kept and the activations of the one segment recomputed at a time both grow as
     * that square root.
     *
     * @return automatic segments
     */
    public static Checkpointing auto() {
        return new Checkpointing(Mode.AUTO, 0, List.of());
    }

    /**
     * Returns the setting that makes each block a selector names a segment.
     *
     * @param selectors {@code class:NAME} (full or simple class name) or {@code path:PATH}
     * @return the setting
     * @throws IllegalArgumentException when no selector is given or one has neither prefix
     */
    public static Checkpointing blocks(String... selectors) {
        Objects.requireNonNull(selectors, "selectors");
        List<String> list = new ArrayList<>();
        for (String selector : selectors) {
            String s = Objects.requireNonNull(selector, "a selector is null").trim();
            if (!(s.startsWith("class:") && s.length() > 6)
                    && !(s.startsWith("path:") && s.length() > 5)) {
                throw new IllegalArgumentException(
                        "A checkpointing selector is class:NAME or path:PATH, got '"
                                + selector
                                + "' (e.g. class:ResidualBlock or path:03SequentialBlock)");
            }
            list.add(s);
        }
        if (list.isEmpty()) {
            throw new IllegalArgumentException(
                    "Checkpointing.blocks needs at least one class:NAME or path:PATH selector");
        }
        return new Checkpointing(Mode.BLOCKS, 0, Collections.unmodifiableList(list));
    }

    /**
     * Reads the text form: {@code none}, {@code stages}, {@code every:N}, {@code auto}, or
     * comma-separated {@code class:NAME} and {@code path:PATH} selectors.
     *
     * @param text the setting
     * @return the setting
     * @throws IllegalArgumentException naming the forms when {@code text} is none of them
     */
    public static Checkpointing parse(String text) {
        Objects.requireNonNull(text, "checkpointing: use none, stages, every:N, auto or selectors");
        String t = text.trim();
        String lower = t.toLowerCase(Locale.ROOT);
        switch (lower) {
            case "none":
            case "off":
            case "":
                return none();
            case "stages":
                return stages();
            case "auto":
                return auto();
            default:
                break;
        }
        if (lower.startsWith("every:")) {
            try {
                return every(Integer.parseInt(t.substring(6).trim()));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(
                        "checkpointing=" + text + ": every:N needs a whole number of stages", e);
            }
        }
        if (lower.startsWith("class:") || lower.startsWith("path:")) {
            return blocks(t.split(","));
        }
        throw new IllegalArgumentException(
                "checkpointing="
                        + text
                        + " is not a setting: use none, stages, every:N, auto, or class:NAME and"
                        + " path:PATH selectors separated by commas");
    }

    /**
     * Reads {@value #PROPERTY} from {@code properties}: {@link #none()} when it is absent.
     *
     * @param properties e.g. a configuration file's
     * @return the setting
     * @throws NullPointerException when {@code properties} is null, naming what to pass
     * @throws IllegalArgumentException when the value is not a setting ({@link #parse})
     */
    public static Checkpointing fromProperties(Properties properties) {
        Objects.requireNonNull(
                properties,
                "Checkpointing.fromProperties needs the Properties to read "
                        + PROPERTY
                        + " from, got null: pass the loaded configuration (an empty Properties"
                        + " means none), or use Checkpointing.none() or Checkpointing.parse(...)");
        String value = properties.getProperty(PROPERTY);
        return value == null ? none() : parse(value);
    }

    /**
     * Returns how the segments are chosen.
     *
     * @return the mode
     */
    public Mode getMode() {
        return mode;
    }

    /**
     * Returns whether anything is checkpointed.
     *
     * @return false for {@link #none()}
     */
    public boolean isEnabled() {
        return mode != Mode.NONE;
    }

    /**
     * Returns the stages in a segment: 1 for {@link Mode#STAGES}, n for {@link Mode#EVERY}, 0 for
     * the other modes (decided by the tree or the selectors).
     *
     * @return the stages in a segment
     */
    public int getStagesPerSegment() {
        return stagesPerSegment;
    }

    /**
     * Returns the selectors of {@link Mode#BLOCKS}, empty otherwise.
     *
     * @return the {@code class:} and {@code path:} selectors
     */
    public List<String> getSelectors() {
        return selectors;
    }

    /** Returns the text form, which {@link #parse} reads back. */
    @Override
    public String toString() {
        return switch (mode) {
            case NONE -> "none";
            case STAGES -> "stages";
            case EVERY -> "every:" + stagesPerSegment;
            case AUTO -> "auto";
            case BLOCKS -> String.join(",", selectors);
        };
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Checkpointing other && toString().equals(other.toString());
    }

    @Override
    public int hashCode() {
        return toString().hashCode();
    }
}
