package io.github.djlamp.amp.cast.strategy;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.DataType;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import java.util.Arrays;

/**
 * The precision of each array one place of the shadow tree casts (a stage's inputs, the wrapper's
 * outputs, an attention product's operands), decided once where DJL cannot name the type.
 *
 * <p>DJL's PyTorch engine reads a bf16 array as {@link DataType#UNKNOWN}, so the engine layer asks
 * libtorch, a TorchScript call, for each such array: at every 16-bit stage of every forward. The
 * arrays reaching one position of one stage come out of the same operations every forward, so what
 * an unnamed type there resolved to the first time is what it resolves to afterwards; a type DJL
 * names (fp32, fp16, an integer) is read from DJL every time, as its arrays keep it.
 */
public final class InputPrecisions {

    /** What a position resolved to when it held no floating array. */
    private static final Object NOT_FLOATING = new Object();

    private final AmpBackend backend;
    // the stage belongs to one device's shadow tree; a race only asks the engine twice
    private volatile Object[] resolved = new Object[0];

    /**
     * Makes the precisions of one place, none decided yet.
     *
     * @param backend the engine layer that answers the first time
     */
    public InputPrecisions(AmpBackend backend) {
        this.backend = backend;
    }

    /**
     * Returns the precision of the array at {@code position}, as {@link AmpBackend#precisionOf}.
     *
     * @param position the array's index in the list the place casts
     * @param array the array
     * @return its precision, or null for an array that is not floating point
     */
    public Precision of(int position, NDArray array) {
        if (array.getDataType() != DataType.UNKNOWN) {
            return backend.precisionOf(array);
        }
        Object[] known = resolved;
        Object seen = position < known.length ? known[position] : null;
        if (seen != null) {
            return seen == NOT_FLOATING ? null : (Precision) seen;
        }
        Precision precision = backend.precisionOf(array);
        Object[] next = Arrays.copyOf(known, Math.max(known.length, position + 1));
        next[position] = precision == null ? NOT_FLOATING : precision;
        resolved = next;
        return precision;
    }
}
