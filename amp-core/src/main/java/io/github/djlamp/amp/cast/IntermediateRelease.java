package io.github.djlamp.amp.cast;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.cast.strategy.StageRelease;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.function.Function;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Drops djl-amp's own handles to the arrays one forward pass of the shadow tree made and no longer
 * reads: the output of a stage once the next stage has consumed it, the cast copies a stage made of
 * its inputs, the branch outputs of a parallel block and what its join function made on the way
 * (ResNet's sum before the ReLU) once joined.
 *
 * <p>DJL attaches every intermediate array to the batch's manager and keeps it until {@code
 * batch.close()}; a DJL handle owns a reference to the native tensor, so every activation of the
 * forward pass stays allocated through backward, including those autograd does not save (a
 * BatchNorm output consumed by a ReLU, a cast copy). Closing the handle drops only djl-amp's
 * reference: autograd keeps its own on what backward needs, PyTorch frees the rest. Never closed: a
 * container's inputs (its caller's), anything passed on to the next stage or returned, and
 * parameters (stages never return them).
 *
 * <p>{@code -Ddjlamp.amp.releaseIntermediates=false} keeps every handle, as plain DJL does. The
 * property is read once, when a block is wrapped ({@link #fromSystemProperty()}); the shadow tree
 * carries the setting, so a forward pass reads no property.
 */
final class IntermediateRelease implements StageRelease {

    /** The system property that turns the release off. */
    static final String PROPERTY = "djlamp.amp.releaseIntermediates";

    /** Drops the handles: the default. */
    static final IntermediateRelease ON = new IntermediateRelease(true);

    /** Keeps every handle, as plain DJL does. */
    static final IntermediateRelease OFF = new IntermediateRelease(false);

    private static final Logger logger = LoggerFactory.getLogger(IntermediateRelease.class);

    private final boolean enabled;
    private final Predicate<NDArray> held;

    private IntermediateRelease(boolean enabled) {
        this(enabled, array -> false);
    }

    private IntermediateRelease(boolean enabled, Predicate<NDArray> held) {
        this.enabled = enabled;
        this.held = held;
    }

    /**
     * Returns this setting, never closing an array {@code held} says someone else still needs (the
     * inputs and outputs of checkpointed segments, until their recomputation).
     */
    IntermediateRelease keeping(Predicate<NDArray> held) {
        return new IntermediateRelease(enabled, held);
    }

    /**
     * Returns the setting {@code -Ddjlamp.amp.releaseIntermediates} gives: {@link #ON} when it is
     * not set; logged when it is.
     *
     * @throws IllegalArgumentException when the property holds neither true nor false
     */
    static IntermediateRelease fromSystemProperty() {
        String value = System.getProperty(PROPERTY);
        if (value == null) {
            return ON;
        }
        IntermediateRelease release;
        switch (value.trim().toLowerCase(Locale.ROOT)) {
            case "true":
                release = ON;
                break;
            case "false":
                release = OFF;
                break;
            default:
                throw new IllegalArgumentException(
                        "-D"
                                + PROPERTY
                                + "="
                                + value
                                + " is not a setting: use true (the default: the wrapper drops its"
                                + " handles to the activations forward no longer reads) or false"
                                + " (it keeps every handle, as plain DJL does)");
        }
        logger.info(
                "djl-amp: -D{}={}: this wrapper {}",
                PROPERTY,
                value,
                release.enabled
                        ? "drops its handles to the activations forward no longer reads"
                        : "keeps its handle to every intermediate array, as plain DJL does");
        return release;
    }

    /** Returns whether the handles are dropped. */
    boolean isEnabled() {
        return enabled;
    }

    /**
     * Closes every array of {@code consumed} that is in none of the lists to keep.
     *
     * @param consumed arrays made by this forward pass that were read and are not needed any more
     * @param keep lists whose arrays must stay open: what the caller handed in, what goes on
     */
    @Override
    public void closeConsumed(NDList consumed, NDList... keep) {
        closeConsumed(Collections.singletonList(consumed), keep);
    }

    /**
     * Closes every array of the {@code consumed} lists that is in none of the lists to keep.
     *
     * @param consumed lists of arrays made by this forward pass that are not needed any more
     * @param keep lists whose arrays must stay open
     */
    void closeConsumed(List<NDList> consumed, NDList... keep) {
        if (!enabled) {
            return;
        }
        Set<NDArray> kept = Collections.newSetFromMap(new IdentityHashMap<>());
        for (NDList list : keep) {
            kept.addAll(list);
        }
        for (NDList list : consumed) {
            for (NDArray array : list) {
                if (kept.add(array)
                        && !held.test(array)) { // once per array, even when a list holds it twice
                    array.close();
                }
            }
        }
    }

    /**
     * Runs {@code stages} in order, each on the previous one's output, closing each output once the
     * next stage has consumed it; never {@code inputs}, the caller's.
     *
     * @param params the forward parameters, or null
     * @return the last stage's output
     */
    NDList chain(
            Iterable<Block> stages,
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        return chain(stages, parameterStore, inputs, null, training, params);
    }

    /**
     * {@link #chain(Iterable, ParameterStore, NDList, boolean, PairList)} with labels: with labels
     * (a training forward), each stage runs its forward with labels, as DJL's SequentialBlock's
     * children do; {@code labels} null runs the forward without.
     */
    NDList chain(
            Iterable<Block> stages,
            ParameterStore parameterStore,
            NDList inputs,
            NDList labels,
            boolean training,
            PairList<String, Object> params) {
        NDList current = inputs;
        for (Block stage : stages) {
            NDList next =
                    labels == null
                            ? stage.forward(parameterStore, current, training, params)
                            : stage.forward(parameterStore, current, labels, params);
            if (current != inputs) {
                closeConsumed(current, inputs, next);
            }
            current = next;
        }
        return current;
    }

    /**
     * Applies a parallel block's join to its branch outputs, then closes the branch outputs and
     * every array the join made but did not return.
     *
     * <p>The branch outputs move to a scope manager for the join, so that what the join computes
     * from them lands there too (a result lands on its first operand's manager); the joined arrays
     * move back to the manager of the block's input before the scope closes.
     *
     * @param join the parallel block's join function
     * @param branches the branch outputs, made by this forward pass
     * @param inputs the parallel block's inputs (its caller's): never closed
     * @return the joined arrays
     */
    NDList join(Function<List<NDList>, NDList> join, List<NDList> branches, NDList inputs) {
        if (!enabled || inputs.isEmpty()) {
            NDList joined = join.apply(branches);
            closeConsumed(branches, inputs, joined);
            return joined;
        }
        NDManager home = inputs.head().getManager();
        Set<NDArray> callers = Collections.newSetFromMap(new IdentityHashMap<>());
        callers.addAll(inputs);
        try (NDManager scope = home.newSubManager()) {
            for (NDList branch : branches) {
                for (NDArray array : branch) {
                    if (!callers.contains(array)) {
                        array.attach(scope);
                    }
                }
            }
            NDList joined = join.apply(branches);
            for (NDArray array : joined) {
                if (array.getManager() == scope) {
                    array.attach(home);
                }
            }
            return joined;
        }
    }
}
