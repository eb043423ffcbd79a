package io.github.djlamp.amp.cast.checkpoint;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.util.PairList;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The checkpointed segments one or more training forward passes ran without recording, in the order
 * they ran, and their recomputation after backward.
 *
 * <p>In the forward pass each segment's floating outputs become leaves that collect the gradient
 * backward brings them. The recomputation takes the segments from the last to the first: it runs
 * the segment again with recording on from detached copies of its inputs, back-propagates the
 * gradients its outputs received through it (adding into the parameters' gradients), and hands the
 * gradients it computed for its inputs on: kept for the segment before, when an input is that
 * segment's output, or pushed into the graph that made the input. Segments sit only in chains of
 * SequentialBlocks ({@link CheckpointPlan}), so that graph is read by this segment alone and still
 * whole.
 *
 * <p>The input gradients are handed on as the recomputation's backward computed them, never through
 * a leaf's gradient: autograd copies what a leaf collects into the leaf's own memory layout, and
 * the segment before would then back-propagate, say, a channels-last gradient where an
 * uncheckpointed backward gives its kernels a contiguous one (a bf16 BatchNorm before an fp32
 * island): the same values, summed in another order.
 *
 * <p>The running statistics a segment's BatchNorms moved in the forward pass are put back after its
 * recomputation moved them again: they move once per step, as without checkpointing.
 */
public final class CheckpointTape {

    /** How many values of an output the first recomputation's check compares at once. */
    private static final long COMPARED_AT_ONCE = 1L << 18;

    /** One segment's run in a forward pass. */
    private record Run(
            CheckpointedSegment segment,
            SegmentStore store,
            NDList inputs,
            boolean[] inputNeedsGradient,
            NDList outputs,
            boolean[] outputIsLeaf,
            PairList<String, Object> params) {}

    private final List<Run> runs = new ArrayList<>();
    private final Set<NDArray> held = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Set<NDArray> callers = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Set<NDArray> leaves = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Map<NDArray, NDArray> handedOn = new IdentityHashMap<>();
    private final Set<CheckpointedSegment> reproduced =
            Collections.newSetFromMap(new IdentityHashMap<>());
    private final Supplier<List<Parameter>> model;
    private volatile boolean holding;
    private long recomputed;
    private boolean estimating;
    private CheckpointSaving saving;

    /**
     * Makes the tape of one wrapped model.
     *
     * @param model the model's parameters: a recomputation adds into the gradients of those its
     *     segment reaches
     */
    CheckpointTape(Supplier<List<Parameter>> model) {
        this.model = model;
    }

    /**
     * Notes the arrays a training forward pass was given or returned: never closed here.
     *
     * @param arrays the caller's arrays
     */
    public synchronized void noteCallers(NDList arrays) {
        callers.addAll(arrays);
    }

    /**
     * Records a segment's run and returns what the segment hands on: each floating output replaced
     * by a leaf (sharing its memory) that collects the gradient backward brings it. A leaf of its
     * own, not the output: an output computed without recording may be a view of a tensor that
     * autograd tracks (a reshape of the segment's input), and such a view does not collect.
     */
    synchronized NDList record(
            CheckpointedSegment segment,
            SegmentStore store,
            NDList inputs,
            NDList outputs,
            PairList<String, Object> params) {
        AmpBackend backend = store.backend();
        Set<NDArray> given = Collections.newSetFromMap(new IdentityHashMap<>());
        given.addAll(inputs);
        boolean[] needs = new boolean[inputs.size()];
        for (int i = 0; i < needs.length; i++) {
            NDArray input = inputs.get(i);
            needs[i] =
                    CheckpointedSegment.isFloating(backend, input)
                            && backend.requiresGradient(input);
        }
        boolean[] leaves = new boolean[outputs.size()];
        NDList handedOn = new NDList(outputs.size());
        for (int k = 0; k < leaves.length; k++) {
            NDArray output = outputs.get(k);
            if (!given.contains(output) && CheckpointedSegment.isFloating(backend, output)) {
                NDArray leaf = backend.detachedLeaf(output, output.getManager());
                leaf.setName(output.getName());
                output.close();
                handedOn.add(leaf);
                leaves[k] = true;
                this.leaves.add(leaf);
            } else {
                handedOn.add(output);
            }
        }
        runs.add(new Run(segment, store, inputs, needs, handedOn, leaves, params));
        if (saving != null) {
            saving.kept(inputs);
            saving.kept(handedOn);
        }
        holding = true;
        held.addAll(inputs);
        held.addAll(handedOn);
        return handedOn;
    }

    /**
     * Whether a recomputation still needs {@code array}: the intermediate release keeps it. Asked
     * for every array every forward pass releases, checkpointing or not, so an empty tape answers
     * without taking the lock.
     *
     * @param array an array the forward pass would release
     * @return whether a recorded segment run still needs it
     */
    public boolean holds(NDArray array) {
        if (!holding) {
            return false;
        }
        synchronized (this) {
            return held.contains(array);
        }
    }

    /** Whether forward passes left segments to recompute. */
    synchronized boolean hasPending() {
        return !runs.isEmpty();
    }

    /**
     * Counts, in the training forward passes until the next recomputation, what the segments keep
     * and what their layers make ({@link #recompute()} returns it).
     */
    synchronized void estimateSaving() {
        estimating = true;
        saving = null;
    }

    /**
     * The count of the forward passes running now, begun by a segment's first run after {@link
     * #estimateSaving()}; null when none is being made.
     */
    synchronized CheckpointSaving saving(AmpBackend backend) {
        if (estimating && saving == null) {
            saving = new CheckpointSaving(backend);
        }
        return saving;
    }

    /** How many segment runs were recomputed so far. */
    synchronized long getRecomputedSegments() {
        return recomputed;
    }

    /**
     * Recomputes every recorded segment run, the last first, and forgets them.
     *
     * @return the count of what the recomputed runs kept and dropped, where {@link
     *     #estimateSaving()} asked for one; null otherwise
     */
    synchronized CheckpointSaving recompute() {
        if (runs.isEmpty()) {
            return null;
        }
        try {
            Set<NDArray> outputsLeft = Collections.newSetFromMap(new IdentityHashMap<>());
            for (Run run : runs) {
                outputsLeft.addAll(run.outputs());
            }
            Map<Device, NDList> trainable = new HashMap<>();
            for (int r = runs.size() - 1; r >= 0; r--) {
                Run run = runs.get(r);
                replay(run, trainable);
                recomputed++;
                for (NDArray output : run.outputs()) {
                    outputsLeft.remove(output); // by identity: DJL's NDArray.equals compares values
                }
                release(run, outputsLeft);
            }
            CheckpointSaving counted = saving;
            if (counted != null) {
                estimating = false;
            }
            return counted;
        } finally {
            discard();
        }
    }

    /** Forgets the recorded runs without recomputing them (their gradients are dropped too). */
    synchronized void discard() {
        saving = null; // the discarded runs are no step's: the next step counts afresh
        runs.clear();
        holding = false;
        held.clear();
        callers.clear();
        leaves.clear();
        for (NDArray gradient : handedOn.values()) {
            gradient.close();
        }
        handedOn.clear();
    }

    private static void requireOpen(Run run) {
        for (NDArray array : run.inputs()) {
            if (array.isReleased()) {
                throw new AmpException(
                        "checkpointing: the input of the checkpointed segment "
                                + run.segment().description()
                                + " was closed before its recomputation. djl-amp recomputes"
                                + " checkpointed segments after backward, at the step: keep the"
                                + " batch open until AmpSession.step() (EasyTrain does), or use"
                                + " Checkpointing.none()");
            }
        }
    }

    private void replay(Run run, Map<Device, NDList> trainable) {
        AmpBackend backend = run.store().backend();
        NDManager home = run.store().stepManager();
        try (NDManager scope = home.newSubManager()) {
            NDList reached = new NDList();
            List<Integer> which = new ArrayList<>();
            for (int k = 0; k < run.outputs().size(); k++) {
                if (run.outputIsLeaf()[k]) {
                    NDArray gradient = gradientAt(run.outputs().get(k), backend, scope);
                    if (gradient != null) {
                        reached.add(gradient);
                        which.add(k);
                    }
                }
            }
            if (reached.isEmpty()) {
                return; // no backward reached the segment: nothing to recompute for
            }
            requireOpen(run);
            Device device = run.outputs().head().getDevice();
            // the segment after this one has been recomputed: the outputs' values are read no more,
            // only the gradients they collected, and the recomputation makes them again; but a
            // segment's first recomputation is compared with them
            boolean compare = !reproduced.contains(run.segment());
            if (!compare) {
                closeOwnOutputs(run);
            }
            boolean recording = backend.setRecording(true);
            try {
                NDList inputs = new NDList(run.inputs().size());
                NDList copies = new NDList();
                List<Integer> pushed = new ArrayList<>();
                for (int i = 0; i < run.inputs().size(); i++) {
                    NDArray input = run.inputs().get(i);
                    if (run.inputNeedsGradient()[i]) {
                        NDArray copy = backend.detachedLeaf(input, scope);
                        inputs.add(copy);
                        copies.add(copy);
                        pushed.add(i);
                    } else {
                        // lent to the scope, so that what the recomputation makes lands there
                        // and goes with it (as in the forward pass), not on the batch's manager
                        input.tempAttach(scope);
                        inputs.add(input);
                    }
                }
                RunningStatistics statistics =
                        RunningStatistics.copy(run.segment(), run.store(), device, scope);
                NDList again =
                        run.segment()
                                .run(
                                        run.store().uncached(scope, false).asParameterStore(),
                                        inputs,
                                        true,
                                        run.params());
                if (compare) {
                    requireReproduced(run, again, backend, scope);
                    reproduced.add(run.segment());
                    closeOwnOutputs(run);
                }
                NDList outputs = new NDList(which.size());
                NDList gradients = new NDList(which.size());
                for (int j = 0; j < which.size(); j++) {
                    NDArray output = again.get(which.get(j));
                    output.attach(scope);
                    if (backend.requiresGradient(output)) {
                        outputs.add(output);
                        gradients.add(reached.get(j));
                    }
                }
                NDList parameters = trainable.computeIfAbsent(device, d -> trainable(run, d));
                List<NDArray> found =
                        outputs.isEmpty() || (copies.isEmpty() && parameters.isEmpty())
                                ? null
                                : backend.backwardTo(outputs, gradients, copies, parameters, scope);
                statistics.restore(backend);
                if (found != null) {
                    handOn(run, pushed, found, backend, home);
                }
            } finally {
                backend.setRecording(recording);
            }
        }
    }

    /**
     * Refuses a recomputation whose outputs are not those of the segment's forward pass (bit for
     * bit in fp32, within rounding in 16 bits: {@link #reproduces}): its gradients would not be the
     * forward pass's. A forward that draws random numbers (DJL's {@code Dropout.dropout} in a
     * block's own forward, a random array) draws new ones in the recomputation, and DJL's PyTorch
     * engine offers no way to save and restore the generator's state for it (TorchScript has no
     * {@code get_rng_state}), as PyTorch's own checkpoint does. Checked at each segment's first
     * recomputation: one host read per segment, once.
     */
    private static void requireReproduced(
            Run run, NDList again, AmpBackend backend, NDManager scope) {
        boolean recording = backend.setRecording(false);
        try {
            for (int k = 0; k < run.outputs().size(); k++) {
                NDArray first = run.outputs().get(k);
                if (!run.outputIsLeaf()[k] || first.isReleased()) {
                    continue;
                }
                try (NDManager comparison = scope.newSubManager()) {
                    requireOutputReproduced(run, k, first, again.get(k), backend, comparison);
                }
            }
        } finally {
            backend.setRecording(recording);
        }
    }

    /**
     * Compares one output of the recomputation with the forward pass's, {@link #COMPARED_AT_ONCE}
     * values at a time: the comparison makes several fp32 arrays of what it compares while the
     * segment's recomputed activations are alive, and a whole output at once made the first step's
     * peak (ResNetV1-18, batch 64, {@code Checkpointing.stages()}: 1.67x a steady step's).
     */
    private static void requireOutputReproduced(
            Run run,
            int k,
            NDArray first,
            NDArray again,
            AmpBackend backend,
            NDManager comparison) {
        Precision precision = run.store().computePrecision();
        NDArray flatFirst = first.reshape(-1);
        flatFirst.attach(comparison);
        NDArray flatAgain = again.reshape(-1);
        flatAgain.attach(comparison);
        long size = flatFirst.size();
        // one host read per output when it reproduces: the count, summed on the device
        NDArray mean =
                precision == Precision.FP32
                        ? null
                        : meanMagnitude(flatFirst, size, backend, comparison);
        NDArray slack = mean == null ? null : mean.div(8);
        NDArray differingCount = comparison.zeros(new Shape(), DataType.INT64);
        for (long at = 0; at < size; at += COMPARED_AT_ONCE) {
            try (NDManager chunk = comparison.newSubManager()) {
                NDArray a = piece(flatFirst, at, size, backend, chunk);
                NDArray b = piece(flatAgain, at, size, backend, chunk);
                differingCount.addi(
                        reproduces(a, b, precision, slack)
                                .logicalNot()
                                .toType(DataType.INT64, false)
                                .sum());
            }
        }
        long differing = differingCount.getLong();
        if (differing > 0) {
            throw new AmpException(
                    "checkpointing: the recomputation of the checkpointed segment '"
                            + run.segment().description()
                            + "' did not reproduce its forward pass (output "
                            + k
                            + String.format(
                                    Locale.ROOT,
                                    " differs in %d of %d values, by up to %.3g where"
                                            + " their mean magnitude is %.3g)",
                                    differing,
                                    size,
                                    largestDifference(flatFirst, flatAgain, size, backend),
                                    (mean != null
                                                    ? mean
                                                    : meanMagnitude(
                                                            flatFirst, size, backend, comparison))
                                            .getFloat())
                            + ", so the gradients would not be the forward"
                            + " pass's. Its forward draws random numbers (Dropout.dropout"
                            + " or a random array in a block's own forward) or is not"
                            + " deterministic; djl-amp cannot replay the random generator"
                            + " of DJL's PyTorch engine, which has no way to save and"
                            + " restore its state. Checkpoint only the stages without"
                            + " randomness, naming them with"
                            + " Checkpointing.blocks(\"path:...\"), or use"
                            + " Checkpointing.none()");
        }
    }

    /** Values {@code at} to {@code at + COMPARED_AT_ONCE} of a flat array, as fp32. */
    private static NDArray piece(
            NDArray flat, long at, long size, AmpBackend backend, NDManager chunk) {
        NDArray slice = flat.get(new NDIndex("{}:{}", at, Math.min(size, at + COMPARED_AT_ONCE)));
        slice.attach(chunk);
        return backend.cast(slice, Precision.FP32, MemoryLayout.CONTIGUOUS, chunk);
    }

    /** The mean absolute value of a flat array, as an fp32 scalar on {@code comparison}. */
    private static NDArray meanMagnitude(
            NDArray flat, long size, AmpBackend backend, NDManager comparison) {
        NDArray sum = comparison.zeros(new Shape(), DataType.FLOAT32);
        for (long at = 0; at < size; at += COMPARED_AT_ONCE) {
            try (NDManager chunk = comparison.newSubManager()) {
                sum.addi(piece(flat, at, size, backend, chunk).abs().sum());
            }
        }
        return sum.divi(Math.max(1, size));
    }

    /** The largest difference of two flat arrays, for the refusal's message. */
    private static float largestDifference(
            NDArray first, NDArray again, long size, AmpBackend backend) {
        float largest = 0;
        for (long at = 0; at < size; at += COMPARED_AT_ONCE) {
            try (NDManager chunk = first.getManager().newSubManager()) {
                NDArray a = piece(first, at, size, backend, chunk);
                NDArray b = piece(again, at, size, backend, chunk);
                largest = Math.max(largest, a.sub(b).abs().max().getFloat());
            }
        }
        return largest;
    }

    /**
     * Whether {@code again} reproduces {@code first}, element by element (NaN where NaN was): bit
     * for bit in fp32. In 16 bits a multi-threaded kernel may round a recomputation otherwise than
     * the forward (seen: DJL's transformer blocks in emulated bf16 on two threads, now and then),
     * so there an element reproduces unless it moved by more than half of itself plus {@code
     * slack}, 1/8 of the mean magnitude of the whole output: what a dropped value does, and
     * rounding does not.
     */
    private static NDArray reproduces(
            NDArray first, NDArray again, Precision precision, NDArray slack) {
        NDArray nan = first.isNaN().logicalAnd(again.isNaN());
        if (precision == Precision.FP32) {
            return first.eq(again).logicalOr(nan);
        }
        NDArray bound = first.abs().mul(0.5f).add(slack);
        return first.sub(again).abs().lte(bound).logicalOr(nan);
    }

    /**
     * The gradient that reached a segment's output: what backward put into the leaf (its readers
     * outside any segment) plus what the recomputations of the segments after it handed on.
     */
    private NDArray gradientAt(NDArray output, AmpBackend backend, NDManager scope) {
        NDArray handed = handedOn.remove(output);
        if (handed != null) {
            handed.attach(scope);
        }
        NDArray collected = output.isReleased() ? null : backend.gradientOrNull(output, scope);
        if (collected == null) {
            return handed;
        }
        return handed == null ? collected : collected.add(handed);
    }

    /**
     * Passes the gradients a recomputation computed for the segment's inputs on: as they are to the
     * segment before (never through its output leaf, which would copy them into its own memory
     * layout, and the segment's backward kernels would not see what an uncheckpointed backward
     * gives them), or into the graph that made the input.
     */
    private void handOn(
            Run run,
            List<Integer> pushed,
            List<NDArray> found,
            AmpBackend backend,
            NDManager home) {
        int last = -1;
        for (int j = 0; j < pushed.size(); j++) {
            if (found.get(j) != null && !leaves.contains(run.inputs().get(pushed.get(j)))) {
                last = j;
            }
        }
        for (int j = 0; j < pushed.size(); j++) {
            NDArray gradient = found.get(j);
            if (gradient == null) {
                continue;
            }
            NDArray input = run.inputs().get(pushed.get(j));
            if (leaves.contains(input)) {
                gradient.attach(home);
                NDArray before = handedOn.put(input, gradient);
                if (before != null) { // the segment before's output read twice in this one
                    NDArray sum = before.add(gradient);
                    sum.attach(home);
                    before.close();
                    gradient.close();
                    handedOn.put(input, sum);
                }
            } else {
                backend.backward(input, gradient, j < last);
            }
        }
    }

    /** The model's parameters on {@code device} that collect gradients, each once. */
    private NDList trainable(Run run, Device device) {
        NDList result = new NDList();
        Set<NDArray> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        AmpBackend backend = run.store().backend();
        for (Parameter parameter : model.get()) {
            if (!parameter.isInitialized() || !parameter.requiresGradient()) {
                continue;
            }
            NDArray value = run.store().delegate().getValue(parameter, device, true);
            if (value != null && seen.add(value) && backend.requiresGradient(value)) {
                result.add(value);
            }
        }
        return result;
    }

    private void closeOwnOutputs(Run run) {
        for (int k = 0; k < run.outputs().size(); k++) {
            NDArray output = run.outputs().get(k);
            if (run.outputIsLeaf()[k] && !callers.contains(output) && !output.isReleased()) {
                output.close();
            }
        }
    }

    /**
     * Closes what only the recomputation still needed: the segment's outputs (the leaves and their
     * gradients) and its inputs, unless the caller owns them or a segment before reads them.
     */
    private void release(Run run, Set<NDArray> outputsLeft) {
        for (NDArray output : run.outputs()) {
            if (!callers.contains(output) && !output.isReleased()) {
                output.close();
            }
        }
        for (NDArray input : run.inputs()) {
            if (!callers.contains(input) && !outputsLeft.contains(input) && !input.isReleased()) {
                input.close();
            }
        }
    }

    /** Copies of a segment's running statistics, put back after its recomputation. */
    private record RunningStatistics(NDList live, NDList saved) {

        static RunningStatistics copy(
                CheckpointedSegment segment, SegmentStore store, Device device, NDManager scope) {
            NDList live = new NDList();
            NDList saved = new NDList();
            for (Parameter parameter : segment.runningStatistics()) {
                if (!parameter.isInitialized()) {
                    continue;
                }
                NDArray value = store.delegate().getValue(parameter, device, true);
                NDArray copy = value.duplicate();
                copy.attach(scope);
                live.add(value);
                saved.add(copy);
            }
            return new RunningStatistics(live, saved);
        }

        void restore(AmpBackend backend) {
            if (!live.isEmpty()) {
                backend.copy(live, saved);
            }
        }
    }
}
