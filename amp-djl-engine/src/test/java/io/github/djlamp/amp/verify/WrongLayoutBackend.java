package io.github.djlamp.amp.verify;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.EnumSet;
import java.util.Set;

/**
 * A test double of the engine layer whose 16-bit route is wrong for images of one channel count in
 * some memory layouts (their values arrive 1.5 times too large), as oneDNN's bf16 kernels were
 * wrong on some machines for such shapes; everything else is the real engine layer's.
 */
final class WrongLayoutBackend extends ForwardingBackend {

    private final Set<MemoryLayout> wrong;
    private final long channels;

    /** Wrong in channels-last only, for 1-channel images. */
    WrongLayoutBackend(AmpBackend real) {
        this(real, EnumSet.of(MemoryLayout.CHANNELS_LAST), 1);
    }

    /** Wrong in the given layouts, for 1-channel images. */
    WrongLayoutBackend(AmpBackend real, Set<MemoryLayout> wrong) {
        this(real, wrong, 1);
    }

    /**
     * Wrong in the given layouts (contiguous stands for every layout but channels-last), for images
     * with {@code channels} channels: tests that must mean the same on a platform whose real
     * small-channel bf16 kernels are wrong use 8 or more, where those platforms were right.
     */
    WrongLayoutBackend(AmpBackend real, Set<MemoryLayout> wrong, long channels) {
        super(real);
        this.wrong = wrong;
        this.channels = channels;
    }

    @Override
    public NDArray cast(NDArray array, Precision target, MemoryLayout layout, NDManager manager) {
        boolean image = array.getShape().dimension() == 4 && array.getShape().get(1) == channels;
        MemoryLayout kind =
                layout == MemoryLayout.CHANNELS_LAST
                        ? MemoryLayout.CHANNELS_LAST
                        : MemoryLayout.CONTIGUOUS;
        if (target.isReduced() && wrong.contains(kind) && image) {
            return real.cast(array.mul(1.5f), target, layout, manager);
        }
        return real.cast(array, target, layout, manager);
    }
}
