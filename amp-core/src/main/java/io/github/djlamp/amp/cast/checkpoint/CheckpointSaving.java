package io.github.djlamp.amp.cast.checkpoint;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.cast.internal.CheckpointControl;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Locale;
import java.util.Set;

/**
 * What the checkpointed segments of one training forward pass kept and what their layers made and
 * dropped: the estimate of what checkpointing saves, which needs the shapes of a real batch.
 *
 * <p>Made: every output of a layer inside a segment, every cast of a layer's input, and whatever a
 * block with its own forward left on the segment's scope (its internals), not counting the
 * segment's outputs, which are kept either way, nor casts of weights. A recorded forward keeps the
 * part of it that backward reads until backward; checkpointing keeps only the segments' inputs and
 * outputs ({@code kept}) and makes one segment's activations again at a time. Counting reads shapes
 * and data types only, never a value.
 */
public final class CheckpointSaving {

    private static final double MIB = 1024.0 * 1024.0;

    private final AmpBackend backend;

    private final Set<NDArray> counted = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Set<NDArray> keptArrays = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Set<NDArray> weightCasts = Collections.newSetFromMap(new IdentityHashMap<>());
    private long madeBytes;
    private long madeBeforeSegment;
    private long largestSegmentBytes;
    private long keptBytes;
    private int segmentRuns;

    /**
     * Makes an empty count.
     *
     * @param backend the engine's view of the arrays (DJL reports bf16 arrays as {@code UNKNOWN})
     */
    CheckpointSaving(AmpBackend backend) {
        this.backend = backend;
    }

    /**
     * Counts arrays a layer inside a segment made (its outputs, the casts of its inputs).
     *
     * @param arrays the arrays made
     */
    public synchronized void made(NDList arrays) {
        for (NDArray array : arrays) {
            if (counted.add(array)) {
                madeBytes += bytesOf(array);
            }
        }
    }

    /**
     * Notes a cast of a weight: not an activation, never counted as made.
     *
     * @param cast the cast weight
     */
    public synchronized void weightCast(NDArray cast) {
        weightCasts.add(cast);
    }

    /**
     * Counts what is still open on a segment's scope when its forward ends (the internals of blocks
     * with their own forward, which the shadow tree cannot release), but for the segment's inputs
     * and outputs and the casts of weights; then the segment's outputs are no longer counted as
     * made (they are kept either way).
     */
    synchronized void segmentEnded(NDManager scope, NDList inputs, NDList outputs) {
        Set<NDArray> boundary = Collections.newSetFromMap(new IdentityHashMap<>());
        boundary.addAll(inputs);
        boundary.addAll(outputs);
        for (NDArray array : scope.getManagedArrays()) {
            if (!boundary.contains(array) && !weightCasts.contains(array) && counted.add(array)) {
                madeBytes += bytesOf(array);
            }
        }
        for (NDArray output : outputs) {
            if (counted.remove(output)) {
                madeBytes -= bytesOf(output);
            }
        }
        weightCasts.clear();
        largestSegmentBytes = Math.max(largestSegmentBytes, madeBytes - madeBeforeSegment);
        madeBeforeSegment = madeBytes;
        segmentRuns++;
    }

    /** Counts what the tape holds for a segment's run until its recomputation. */
    synchronized void kept(NDList arrays) {
        for (NDArray array : arrays) {
            if (keptArrays.add(array)) {
                keptBytes += bytesOf(array);
            }
        }
    }

    /** The counts so far. */
    synchronized CheckpointControl.SavingEstimate estimate() {
        return new CheckpointControl.SavingEstimate(
                segmentRuns, keptBytes, madeBytes, largestSegmentBytes);
    }

    /** The line for the log: what was kept, what was dropped, what that may save. */
    static String describe(CheckpointControl.SavingEstimate estimate) {
        int runs = estimate.segmentRuns();
        return String.format(
                Locale.ROOT,
                "%d checkpointed segment %s kept %.1f MiB (their inputs and outputs) and dropped"
                        + " %.1f MiB of activations their layers made; the recomputation makes one"
                        + " segment's again at a time (at most %.1f MiB), so a step of these shapes"
                        + " holds up to about %.1f MiB less through backward (less where backward"
                        + " would not have kept all of them)",
                runs,
                runs == 1 ? "run" : "runs",
                estimate.keptBytes() / MIB,
                estimate.droppedBytes() / MIB,
                estimate.largestSegmentBytes() / MIB,
                estimate.upperBoundSavingBytes() / MIB);
    }

    private long bytesOf(NDArray array) {
        if (array.isReleased()) {
            return 0;
        }
        Precision precision = backend.precisionOf(array);
        long elementBytes =
                precision != null ? precision.bits() / 8 : array.getDataType().getNumOfBytes();
        return array.getShape().size() * elementBytes;
    }
}
