package io.github.djlamp.amp.capture;

import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import io.github.djlamp.amp.spi.StepGraph;
import io.github.djlamp.amp.spi.StepGraphs;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The first replay of a captured step, checked: from the same state and on the same batch, the
 * replay and an eager step must leave every array the step changes where the other leaves it. The
 * eager step's state is kept either way, so the batch trains right whatever the replay did.
 *
 * <p>Where the step draws random numbers (dropout), the random-number generator is put back between
 * the replay and the eager step, so that both draw the same; graphs that cannot do so leave such a
 * step unchecked.
 *
 * <p>The comparison allows what nondeterministic kernels (atomic additions in some backward passes)
 * leave between two runs: a difference of at most a thousandth of the replay's own change to the
 * array, plus a millionth of its largest value. A replay that skipped the update, read an old
 * batch, an old rate or an array replaced since the capture differs by the whole step.
 *
 * <p>It holds one copy of the step's state: the state before the replay is copied, and after the
 * replay each array's content and that copy trade places, one array at a time. Where even that
 * cannot be allocated (a model that fills the device), the step runs eagerly from the state as it
 * was, and capturing ends, said in the outcome.
 */
final class FirstReplayCheck {

    private static final Logger logger = LoggerFactory.getLogger(FirstReplayCheck.class);

    private static final double OF_THE_STEP = 1e-3;
    private static final double OF_THE_VALUE = 1e-6;

    private final CaptureHooks hooks;
    private final List<NDArray> arrays = new ArrayList<>();
    private final List<NDArray> replaySteps = new ArrayList<>();
    private NDList kept; // the state before the replay, then the replay's results
    private int traded; // arrays whose content and copy traded places
    private boolean replayed;

    /**
     * Whether the first replay is checked: graphs whose replays compute the step, and a step whose
     * random draws, if it has any, the graphs can repeat (said once where they cannot).
     */
    static boolean wanted(CaptureHooks hooks) {
        CaptureHooks.RandomDraws random = hooks.randomDraws();
        if (random != null
                && !(random.fromDefaultGenerator()
                        && hooks.graphs().repeatsRandomDraws(hooks.device()))) {
            logger.info(
                    "djl-amp does not check the first replay against an eager step: {}, and"
                            + " the graphs cannot put that random state back between the two, so"
                            + " their draws would differ",
                    random.where());
            return false;
        }
        return hooks.graphs().replaysTheStep();
    }

    /**
     * The eager step's outputs, and how the replay differed from it (null: it did not), or why it
     * could not be compared (null: it was).
     */
    record Outcome(NDList outputs, String mismatch, String unchecked) {}

    /**
     * Replays {@code graph}, puts the state back, runs {@code eager} on the same batch and
     * compares; the eager step's state and outputs stand.
     */
    static Outcome run(
            CaptureHooks hooks, NDManager manager, StepGraph graph, Supplier<NDList> eager) {
        FirstReplayCheck check = new FirstReplayCheck(hooks);
        StepGraphs graphs = hooks.graphs();
        StepGraphs.RandomPosition random =
                graphs.repeatsRandomDraws(hooks.device())
                        ? graphs.saveRandomPosition(hooks.device())
                        : null;
        String unchecked = null;
        try (NDManager scope = manager.newSubManager()) {
            try {
                check.keepState(scope);
                check.replay(graph);
                check.tradePlaces(scope);
            } catch (EngineException e) {
                check.putBackWhatWasNotTraded();
                unchecked = cannotCopy(e);
            }
            if (unchecked == null) {
                if (random != null) {
                    random.restore(); // the eager step draws what the replay drew
                }
                NDList outputs = eager.get();
                return new Outcome(outputs, check.mismatch(scope), null);
            }
        }
        // the copies freed first: the step runs eagerly from the state as it was
        if (random != null) {
            random.restore();
        }
        return new Outcome(eager.get(), null, unchecked);
    }

    private static String cannotCopy(EngineException e) {
        return "its first replay could not be checked: the engine refused the check's copies or"
                + " the replay ("
                + e.getMessage()
                + "; a device too full to hold a copy of the step's state)";
    }

    private FirstReplayCheck(CaptureHooks hooks) {
        this.hooks = hooks;
        hooks.checkedArrays(arrays);
    }

    /** Keeps a copy of the state before the step, under {@code scope}. */
    private void keepState(NDManager scope) {
        kept = new NDList(arrays.size());
        for (NDArray array : arrays) {
            NDArray copy = array.duplicate();
            copy.attach(scope);
            kept.add(copy);
        }
    }

    /** Replays the graph over the state just copied. */
    private void replay(StepGraph graph) {
        replayed = true; // from here the state is put back if anything fails
        graph.replay();
    }

    /**
     * After the replay, array by array: how far the replay moved it (a device value), then the
     * state before the replay back in the array and the replay's result in the copy.
     */
    private void tradePlaces(NDManager scope) {
        for (int i = 0; i < arrays.size(); i++) {
            NDArray array = arrays.get(i);
            NDArray before = kept.get(i);
            try (NDManager each = scope.newSubManager()) {
                NDArray result = array.duplicate();
                result.attach(each);
                NDArray moved = inFloat64(result, each);
                NDArray start = inFloat64(before, each);
                NDArray step =
                        largest(moved.sub(start).abs(), finite(moved).logicalAnd(finite(start)));
                step.attach(scope);
                replaySteps.add(step);
                // two copies, in order: one fused copy of both pairs may read the copy while
                // writing it (on CUDA a multi-tensor kernel copies its pairs at once)
                hooks.copy(new NDList(array), new NDList(before));
                hooks.copy(new NDList(before), new NDList(result));
            }
            traded++;
        }
    }

    /**
     * After a failure: where the replay ran, the arrays not yet traded hold its result, and the
     * state before it goes back; where the state was not yet copied, nothing ran.
     */
    private void putBackWhatWasNotTraded() {
        if (!replayed) {
            return;
        }
        for (int i = traded; i < arrays.size(); i++) {
            hooks.copy(new NDList(arrays.get(i)), new NDList(kept.get(i)));
        }
    }

    /**
     * After the eager step: where the replay's results differ from it beyond the allowance, says
     * which array and by how much (host reads, once). What it computes lives under {@code scope}.
     *
     * @return the difference in words, or null when the replay is the eager step
     */
    private String mismatch(NDManager scope) {
        for (int i = 0; i < arrays.size(); i++) {
            try (NDManager each = scope.newSubManager()) {
                String found = mismatch(i, each);
                if (found != null) {
                    return found;
                }
            }
        }
        return null;
    }

    /** One array compared, all it computes under {@code each}. */
    private String mismatch(int i, NDManager each) {
        NDArray eager = inFloat64(arrays.get(i), each);
        NDArray replay = inFloat64(kept.get(i), each);
        NDArray bothNaN = eager.isNaN().logicalAnd(replay.isNaN());
        NDArray differs = eager.neq(replay).logicalAnd(bothNaN.logicalNot());
        if (!differs.any().getBoolean()) {
            return null;
        }
        double difference = largest(eager.sub(replay).abs(), differs).getDouble();
        double step = replaySteps.get(i).getDouble();
        double value = largest(eager.abs(), finite(eager)).getDouble();
        if (!Double.isNaN(difference) && difference <= OF_THE_STEP * step + OF_THE_VALUE * value) {
            return null;
        }
        return "array "
                + i
                + " of "
                + arrays.size()
                + " "
                + arrays.get(i).getShape()
                + ": the replay differs from the eager step by up to "
                + difference
                + " where the replay itself moved it by up to "
                + step;
    }

    private static NDArray inFloat64(NDArray array, NDManager each) {
        NDArray copy = array.toType(DataType.FLOAT64, true);
        copy.attach(each);
        return copy;
    }

    private static NDArray finite(NDArray values) {
        return values.isInfinite().logicalOr(values.isNaN()).logicalNot();
    }

    /** The largest of {@code values} where {@code mask} holds (NaN propagates); 0 elsewhere. */
    private static NDArray largest(NDArray values, NDArray mask) {
        NDArray kept = NDArrays.where(mask, values, values.zerosLike());
        return kept.size() == 0 ? values.getManager().create(0d) : kept.max();
    }
}
